// What agentk does with the streams kas opens: each starts with a typed header; KIND_HTTP
// streams carry plain HTTP/1.1 for the service the header names.
import {
  type HttpStreamServer,
  Kind,
  RejectCode,
  StreamDispatcher,
  type StreamHeader,
  StreamRejectedError,
  serveHttp,
} from "../../lib/tunnel/index.ts";
import { KUBERNETES_SERVICE } from "./kubernetes/index.ts";
import type { AgentkMetrics, Logger } from "./observability/index.ts";
import type { Forwarder } from "./proxy/forward.ts";

export interface HttpRoutes {
  /** The Kubernetes API proxy; undefined when agentk has no Kubernetes configuration. */
  kubernetes: Forwarder | undefined;
  /** Allow-listed in-cluster services by name. */
  services: ReadonlyMap<string, Forwarder>;
}

export interface StreamRouter<Ctx> {
  readonly dispatcher: StreamDispatcher<Ctx>;
  /** Lets in-flight HTTP exchanges finish (up to `graceMs`), then closes what is left. */
  close(graceMs: number): Promise<void>;
}

export interface StreamRouterDeps {
  log: Logger;
  metrics: Pick<AgentkMetrics, "streamHandlerErrors">;
}

/** Serves `routes`; refused streams are logged, streams whose handler failed are logged and counted. */
export function createStreamRouter<Ctx>(routes: HttpRoutes, deps: StreamRouterDeps): StreamRouter<Ctx> {
  const { log, metrics } = deps;
  const servers = new Map<string, HttpStreamServer>();
  const forwarders = [
    ...(routes.kubernetes ? [[KUBERNETES_SERVICE, routes.kubernetes] as const] : []),
    ...routes.services,
  ];
  for (const [name, forwarder] of forwarders) {
    const served = serveHttp(forwarder.request);
    served.server.on("upgrade", forwarder.upgrade);
    servers.set(name, served);
  }

  const admit = (header: StreamHeader) => {
    if (servers.has(header.service)) return;
    if (header.service === KUBERNETES_SERVICE) {
      throw new StreamRejectedError(RejectCode.REJECT_CODE_UNAVAILABLE, "no Kubernetes configuration");
    }
    throw new StreamRejectedError(
      RejectCode.REJECT_CODE_NOT_FOUND,
      `service ${JSON.stringify(header.service)} is not allow-listed`,
    );
  };
  const dispatcher = new StreamDispatcher<Ctx>({
    onReject: (error) => log.info({ err: error.message }, "stream refused"),
    // A stream already accepted whose handler then threw: a bug, not the peer's doing.
    onHandlerError: (err, header) => {
      metrics.streamHandlerErrors.inc({ service: header.service });
      log.error({ err, service: header.service }, "HTTP stream handler failed");
    },
  }).register(Kind.KIND_HTTP, (stream, header) => servers.get(header.service)!.handle(stream), { admit });

  return {
    dispatcher,
    async close(graceMs) {
      await Promise.all([...servers.values()].map((s) => s.close({ graceMs })));
      for (const [, forwarder] of forwarders) forwarder.close();
    },
  };
}
