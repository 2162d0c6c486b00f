import { readFile } from "node:fs/promises";
import type { Router } from "../../../lib/router/index.ts";
import {
  type Authenticate,
  type RejectedHandshake,
  type StreamDispatcher,
  serveTunnels,
  type TunnelOptions,
  type TunnelServer,
} from "../../../lib/tunnel/index.ts";
import type { AgentIdentity, AgentSession } from "../../../modules/runtime/index.ts";
import type { ListenConfig } from "../../../tool/config/values.ts";
import { type LimitCounter, limitReporter } from "../../../tool/http/serve/index.ts";
import type { TokenRecheck } from "../auth/index.ts";
import { connectionAgeDelayMs } from "./connection-age.ts";
import { closeOnRevocation } from "./revocation.ts";

export type { AgentSession } from "../../../modules/runtime/index.ts";

export interface AgentListenerOptions {
  listen: ListenConfig;
  authenticate: Authenticate<AgentIdentity>;
  router: Router;
  handshakeTimeoutMs?: number;
  /** Handshakes wait while the event loop is busier than this share (lib/tunnel's `maxLoopUtilization`). */
  maxLoopUtilization?: number;
  /** Connections open at once (default 10000) and HTTP/2 streams per connection (default 100). */
  maxConnections?: number;
  maxStreamsPerConnection?: number;
  /** Where connections closed for a limit are counted. */
  limitCounter?: LimitCounter;
  /** Tunnels older than this, +-10 %, get GoAway (the agent reconnects, maybe to another replica). */
  maxConnectionAgeMs?: number;
  /** Grace given to a tunnel drained for age. Default 30 s. */
  ageDrainGraceMs?: number;
  tunnel?: TunnelOptions;
  /**
   * Serves the streams agents open toward kas (configuration feed, GitOps, informer views…):
   * later modules register their kinds here. Without it such streams are refused.
   */
  dispatcher?: StreamDispatcher<AgentSession>;
  onReject?: (rejected: RejectedHandshake) => void;
  /** Told each tunnel as it comes up, before anything else (the per-token limits hold its slot). */
  onTunnel?: (session: AgentSession) => void;
  /** Re-checks each tunnel's token while it is open; a refused token closes the agent's tunnels. */
  tokenRecheck?: Pick<TokenRecheck, "watch">;
  log?: {
    info(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
    debug(obj: object, msg: string): void;
  };
}

export interface AgentListener {
  readonly url: string;
  readonly server: TunnelServer<AgentIdentity>;
  /** Stop accepting, GoAway to every tunnel, give their streams `graceMs` to finish, close. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Where agentk connects: `serveTunnels` with the agent authentication hook; each tunnel is
 * registered with the router under the authenticated agent id. The router's registry is the one
 * record of the tunnels: metrics and the agent list follow its events.
 */
export async function serveAgents(options: AgentListenerOptions): Promise<AgentListener> {
  const { listen, router, dispatcher, log } = options;
  const tls =
    listen.certificateFile && listen.keyFile
      ? { cert: await readFile(listen.certificateFile), key: await readFile(listen.keyFile) }
      : undefined;
  const server = await serveTunnels<AgentIdentity>({
    ...(listen.address.host !== undefined && { host: listen.address.host }),
    port: listen.address.port,
    ...(tls && { tls }),
    authenticate: options.authenticate,
    ...(options.handshakeTimeoutMs !== undefined && { handshakeTimeoutMs: options.handshakeTimeoutMs }),
    ...(options.maxLoopUtilization !== undefined && { maxLoopUtilization: options.maxLoopUtilization }),
    ...(options.maxConnections !== undefined && { maxConnections: options.maxConnections }),
    ...(options.maxStreamsPerConnection !== undefined && {
      maxStreamsPerConnection: options.maxStreamsPerConnection,
    }),
    onLimit: limitReporter("agent", log, options.limitCounter),
    ...(options.tunnel && { tunnel: options.tunnel }),
    ...(options.onReject && { onReject: options.onReject }),
    onSession: (session) => {
      const { agentId, projectId, pod } = session.identity;
      options.onTunnel?.(session);
      router.register(agentId, session);
      if (options.tokenRecheck) closeOnRevocation(session, options.tokenRecheck, log);
      if (dispatcher) session.on("stream", (stream) => void dispatcher.handle(stream, session));
      if (options.maxConnectionAgeMs !== undefined) {
        // +-10 %: the tunnels of agents that connected together (say, after a kas restart) are
        // drained, and come back, spread out rather than all at the same moment; on a grid of
        // durations, so that the timers of agents gone leave no timer list each behind.
        const timer = setTimeout(
          () => void session.close(options.ageDrainGraceMs ?? 30_000),
          connectionAgeDelayMs(options.maxConnectionAgeMs),
        );
        timer.unref();
        session.on("close", () => clearTimeout(timer));
      }
      const remoteAddress = session.stats.remoteAddress;
      const who = { agentId, projectId, remoteAddress, ...(pod && { pod }) };
      log?.info(who, "agent connected");
      session.on("close", (err) => log?.info({ ...who, ...(err && { err }) }, "agent disconnected"));
    },
  });

  return {
    url: server.url,
    server,
    close: (graceMs = 30_000) => server.close(graceMs),
  };
}
