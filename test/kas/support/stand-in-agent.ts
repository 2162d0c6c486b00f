import { createServer, type RequestListener, type Server } from "node:http";
import type { HttpStreamServer } from "../../../lib/tunnel/http/index.ts";
import {
  type BackoffOptions,
  Kind,
  RejectCode,
  StreamDispatcher,
  StreamRejectedError,
  serveHttp,
  TunnelClient,
} from "../../../lib/tunnel/index.ts";

export interface StandInAgentOptions {
  /** kas's agent listener, ws://… */
  url: string;
  token: string;
  /** Allow-listed services by name ("kubernetes" is the Kubernetes API proxy). */
  services: Record<string, RequestListener | Server>;
  backoff?: BackoffOptions;
  /** Refuses streams before the service check (e.g. PERMISSION_DENIED), as agentk's policy would. */
  refuse?: (service: string) => StreamRejectedError | undefined;
}

/**
 * An agent made from the library alone (until agentk lands): one reconnecting tunnel, KIND_HTTP
 * streams dispatched to node:http servers by service name, unknown names refused with NOT_FOUND
 * and the reason agentk gives.
 */
export function startStandInAgent(options: StandInAgentOptions) {
  const servers = new Map<string, HttpStreamServer>();
  for (const [name, service] of Object.entries(options.services)) {
    servers.set(name, serveHttp(service instanceof Function ? createServer(service) : service));
  }
  const dispatcher = new StreamDispatcher();
  dispatcher.register(Kind.KIND_HTTP, (stream, header) => servers.get(header.service)!.handle(stream), {
    admit: (header) => {
      const refusal = options.refuse?.(header.service);
      if (refusal) throw refusal;
      if (!servers.has(header.service)) {
        throw new StreamRejectedError(
          RejectCode.REJECT_CODE_NOT_FOUND,
          `service "${header.service}" is not allow-listed`,
        );
      }
    },
  });
  const client = new TunnelClient({
    url: options.url,
    dial: { headers: { authorization: `Bearer ${options.token}` }, proxy: false },
    tunnel: { keepAliveIntervalMs: 0 },
    backoff: options.backoff ?? { initialMs: 50, maxMs: 200 },
    onStream: (stream) => void dispatcher.handle(stream, undefined),
  });
  const rejected: number[] = [];
  client.on("retry", ({ error }) => rejected.push((error as { status?: number }).status ?? 0));
  client.start();
  return {
    client,
    /** HTTP statuses of refused handshakes so far (0 for other failures). */
    rejected,
    async stop() {
      await client.stop(200);
      await Promise.all([...servers.values()].map((s) => s.close({ graceMs: 200 })));
    },
  };
}
