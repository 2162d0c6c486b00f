import type { Duplex } from "node:stream";
import type { StreamHandler } from "../header/index.ts";
import { DEFAULT_GRACE_MS } from "../session/grace.ts";
import type { TunnelSession } from "../session/tunnel-session.ts";
import type { GrpcStreamServer } from "./stream-server.ts";

export interface TunnelGrpcHandlerOptions<I, P> {
  /** What `server.peerOf(call)` returns for the calls of a tunnel. Default: the tunnel's identity. */
  peer?: (session: TunnelSession<I>) => P;
  /**
   * Once a tunnel drains, how long calls on its gRPC connections may run before they end with
   * UNAVAILABLE. Keep it below the tunnel's own drain grace, so that they end with that status
   * rather than with the tunnel (a cut also reads UNAVAILABLE, without the explanation).
   * Default half of `DEFAULT_GRACE_MS`.
   */
  drainGraceMs?: number;
}

/**
 * The `KIND_GRPC` handler for a {@link gitlab-agent-tunnel!StreamDispatcher} whose context is the tunnel a stream
 * arrived on: serves the stream with `server`, the tunnel's identity as the calls' peer (what
 * `server.peerOf(call)` returns; nothing in a request can change it). When the tunnel starts
 * draining (either end sent GoAway: age limit, shutdown, a departing peer), its gRPC connections
 * get HTTP/2 GOAWAY at once, so the client takes its next calls to its next tunnel while the
 * running ones finish here.
 */
export function tunnelGrpcHandler<I, P = I>(
  server: GrpcStreamServer<P>,
  opts: TunnelGrpcHandlerOptions<I, P> = {},
): StreamHandler<TunnelSession<I>> {
  const graceMs = opts.drainGraceMs ?? DEFAULT_GRACE_MS / 2;
  const peer = opts.peer ?? ((session: TunnelSession<I>) => session.identity as unknown as P);
  return (stream: Duplex, _header, session) => {
    server.inject(stream, peer(session));
    const onDraining = () => void server.drain(stream, graceMs);
    if (session.draining) return onDraining();
    session.once("draining", onDraining);
    stream.once("close", () => session.off("draining", onDraining));
  };
}
