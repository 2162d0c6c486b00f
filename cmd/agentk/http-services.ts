// What agentk does with the streams kas opens: each starts with a typed header; KIND_HTTP
// streams carry plain HTTP/1.1 for the service the header names, served by whichever module
// added that service.
import {
  type HttpStreamServer,
  Kind,
  RejectCode,
  StreamDispatcher,
  type StreamHeader,
  StreamRejectedError,
  serveHttp,
} from "../../lib/tunnel/index.ts";
import type { HttpServices } from "../../modules/runtime/index.ts";
import type { Forwarder } from "../../tool/http/proxy/index.ts";
import type { AgentkMetrics, Logger } from "./observability/index.ts";

export interface HttpServiceStreams<Ctx> extends HttpServices {
  readonly dispatcher: StreamDispatcher<Ctx>;
  /** Lets in-flight HTTP exchanges finish (up to `graceMs`), then closes what is left. */
  close(graceMs: number): Promise<void>;
}

export interface HttpServiceStreamsDeps<Ctx> {
  log: Logger;
  metrics: Pick<AgentkMetrics, "streamHandlerErrors">;
  /**
   * When a stream's context (its tunnel) no longer takes work: its kept-alive HTTP connection then
   * closes after the exchange under way, so kas's next request opens a stream on the new tunnel.
   */
  drainingOf?: (ctx: Ctx) => AbortSignal;
}

/** Serves the added services; refused streams are logged, streams whose handler failed are logged and counted. */
export function createHttpServiceStreams<Ctx>(deps: HttpServiceStreamsDeps<Ctx>): HttpServiceStreams<Ctx> {
  const { log, metrics, drainingOf } = deps;
  const servers = new Map<string, { served: HttpStreamServer; forwarder: Forwarder }>();
  const unavailable = new Map<string, string>();

  const admit = (header: StreamHeader) => {
    if (servers.has(header.service)) return;
    const reason = unavailable.get(header.service);
    if (reason !== undefined) throw new StreamRejectedError(RejectCode.REJECT_CODE_UNAVAILABLE, reason);
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
  }).register(
    Kind.KIND_HTTP,
    (stream, header, ctx) => servers.get(header.service)!.served.handle(stream, undefined, drainingOf?.(ctx)),
    { admit },
  );

  return {
    dispatcher,
    add(name, forwarder) {
      if (servers.has(name)) throw new Error(`HTTP service ${name} is served twice`);
      const served = serveHttp(forwarder.request);
      served.server.on("upgrade", forwarder.upgrade);
      servers.set(name, { served, forwarder });
    },
    unavailable(name, reason) {
      unavailable.set(name, reason);
    },
    async close(graceMs) {
      await Promise.all([...servers.values()].map((s) => s.served.close(graceMs)));
      for (const { forwarder } of servers.values()) forwarder.destroy();
    },
  };
}
