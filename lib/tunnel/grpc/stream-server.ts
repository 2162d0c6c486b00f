import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";

export interface GrpcStreamServerOptions {
  /** Default insecure: the tunnel under the stream is already authenticated and encrypted. */
  credentials?: grpc.ServerCredentials;
}

export interface GrpcStreamServer<P> {
  /** Serves the HTTP/2 connection a peer runs over `stream`; calls on it report `peer` via `peerOf`. */
  inject(stream: Duplex, peer?: P): void;
  /** The peer given to `inject` for the stream this call came over. */
  peerOf(call: { readonly metadata: grpc.Metadata }): P | undefined;
  /** Streams currently served. */
  readonly streams: number;
  /**
   * Stops serving streams: sends HTTP/2 GOAWAY on each, lets running calls finish for `graceMs`,
   * then destroys what is left (default 5 s). Resolves once every stream is closed. The
   * grpc.Server itself (and any port it is bound to) is left alone.
   */
  close(graceMs?: number): Promise<void>;
}

export const DEFAULT_CLOSE_GRACE_MS = 5_000;
const BACKSTOP_MS = 1_000;

interface Served {
  stream: Duplex;
  injector: grpc.ConnectionInjector;
}

/**
 * Serves a grpc-js Server on accepted Duplex streams (no listening socket), one HTTP/2
 * connection per stream.
 *
 * Which peer a call came over: each stream gets its own connection injector whose credentials
 * carry an interceptor that tags the call's incoming Metadata object with the stream's peer.
 * Handlers see that same Metadata object as `call.metadata`, so `peerOf(call)` needs no
 * addresses (streams have none) and cannot be forged by anything the remote sends. A server
 * interceptor that replaces (rather than passes on) the Metadata object hides the peer.
 */
export function createGrpcStreamServer<P = unknown>(
  server: grpc.Server,
  opts: GrpcStreamServerOptions = {},
): GrpcStreamServer<P> {
  const credentials = opts.credentials ?? grpc.ServerCredentials.createInsecure();
  const peers = new WeakMap<grpc.Metadata, P | undefined>();
  const served = new Set<Served>();
  let closing: Promise<void> | undefined;

  const tagWith =
    (peer: P | undefined): grpc.ServerInterceptor =>
    (_method, call) =>
      new grpc.ServerInterceptingCall(call, {
        start: (next) =>
          next({
            onReceiveMetadata: (metadata, nextMetadata) => {
              peers.set(metadata, peer);
              nextMetadata(metadata);
            },
          }),
      });

  function inject(stream: Duplex, peer?: P): void {
    // Errors (a peer reset) end the HTTP/2 session, which fails its calls; nothing else to do.
    stream.on("error", () => {});
    if (closing || stream.destroyed) {
      stream.destroy();
      return;
    }
    const injector = server.createConnectionInjector(
      grpc.experimental.createServerCredentialsWithInterceptors(credentials, [tagWith(peer)]),
    );
    const entry: Served = { stream, injector };
    served.add(entry);
    stream.once("close", () => {
      served.delete(entry);
      injector.destroy();
    });
    injector.injectConnection(stream);
  }

  async function closeAll(graceMs: number): Promise<void> {
    const all = [...served];
    const closed = all.map(({ stream }) => (stream.closed ? undefined : onceClosed(stream)));
    for (const { injector } of all) injector.drain(graceMs);
    // Ending an HTTP/2 session only half-closes its stream (FIN); a peer that never answers with
    // its own FIN (e.g. one that never spoke HTTP/2) would hold it open: the backstop resets it.
    const timer = setTimeout(() => {
      for (const { stream } of all) stream.destroy();
    }, graceMs + BACKSTOP_MS);
    await Promise.all(closed);
    clearTimeout(timer);
  }

  return {
    inject,
    peerOf: (call) => peers.get(call.metadata),
    get streams() {
      return served.size;
    },
    close(graceMs = DEFAULT_CLOSE_GRACE_MS) {
      closing ??= closeAll(graceMs);
      return closing;
    },
  };
}

function onceClosed(stream: Duplex): Promise<void> {
  return new Promise((resolve) => stream.once("close", () => resolve()));
}
