import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { DEFAULT_GRACE_MS } from "../session/grace.ts";

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
   * Drains the connection served on `stream` (one given to `inject`): sends HTTP/2 GOAWAY, so the
   * client opens a new connection for its next calls while the running ones go on. Calls still
   * running after `graceMs` (default `DEFAULT_GRACE_MS`) end with UNAVAILABLE ({@link DRAINED_DETAILS}), which
   * clients read as "call again"; their handlers see the call cancelled. Resolves once the stream
   * is closed. Idempotent; a stream not served resolves at once.
   */
  drain(stream: Duplex, graceMs?: number): Promise<void>;
  /**
   * Stops serving streams: drains each (see `drain`) with `graceMs` (default `DEFAULT_GRACE_MS`) and destroys
   * streams injected later. Resolves once every stream is closed. The grpc.Server itself (and any
   * port it is bound to) is left alone.
   */
  close(graceMs?: number): Promise<void>;
}

/** After the grace: time for the last statuses to go out before the connection is cut. */
const BACKSTOP_MS = 1_000;
/** What a call cut short by a drain reports; the client's cue to call again (on a new connection). */
export const DRAINED_DETAILS = "the connection is draining: call again";

interface Served {
  stream: Duplex;
  injector: grpc.ConnectionInjector;
  /** Calls on this connection that have not ended yet. */
  running: Set<grpc.ServerInterceptingCall>;
  draining: Promise<void> | undefined;
}

async function drainServed({ stream, injector, running }: Served, graceMs: number): Promise<void> {
  if (stream.closed) return;
  const closed = new Promise<void>((resolve) => stream.once("close", () => resolve()));
  // GOAWAY now; grpc-js' own cut (RST_STREAM CANCEL, read as CANCELLED) only as a backstop.
  injector.drain(graceMs + BACKSTOP_MS);
  const endCalls = setTimeout(() => {
    for (const call of [...running]) {
      call.sendStatus({ code: grpc.status.UNAVAILABLE, details: DRAINED_DETAILS, metadata: null });
    }
  }, graceMs);
  // Ending an HTTP/2 session only half-closes its stream (FIN); a peer that never answers with
  // its own FIN (e.g. one that never spoke HTTP/2) would hold it open: the backstop resets it.
  const cut = setTimeout(() => stream.destroy(), graceMs + BACKSTOP_MS);
  await closed;
  clearTimeout(endCalls);
  clearTimeout(cut);
}

/**
 * Serves a grpc-js Server on accepted Duplex streams (no listening socket), one HTTP/2
 * connection per stream.
 *
 * Which peer a call came over: each stream gets its own connection injector whose credentials
 * carry an interceptor that tags the call's incoming Metadata object with the stream's peer.
 * Handlers see that same Metadata object as `call.metadata`, so `peerOf(call)` needs no
 * addresses (streams have none) and cannot be forged by anything the remote sends. A server
 * interceptor that replaces (rather than passes on) the Metadata object hides the peer. The
 * same interceptor keeps the stream's running calls, so a drain can end them with a status.
 */
export function createGrpcStreamServer<P = unknown>(
  server: grpc.Server,
  opts: GrpcStreamServerOptions = {},
): GrpcStreamServer<P> {
  const credentials = opts.credentials ?? grpc.ServerCredentials.createInsecure();
  const peers = new WeakMap<grpc.Metadata, P | undefined>();
  const served = new Map<Duplex, Served>();
  let closing: Promise<void> | undefined;

  /** Tags each call with `peer` and keeps it in `running` until its status is sent or it is cancelled. */
  const interceptorFor =
    (peer: P | undefined, running: Set<grpc.ServerInterceptingCall>): grpc.ServerInterceptor =>
    (_method, next) => {
      const call: grpc.ServerInterceptingCall = new grpc.ServerInterceptingCall(next, {
        start: (proceed) => {
          running.add(call);
          proceed({
            onReceiveMetadata: (metadata, nextMetadata) => {
              peers.set(metadata, peer);
              nextMetadata(metadata);
            },
            onCancel: () => running.delete(call),
          });
        },
        sendStatus: (status, nextStatus) => {
          running.delete(call);
          nextStatus(status);
        },
      });
      return call;
    };

  function inject(stream: Duplex, peer?: P): void {
    // Errors (a peer reset) end the HTTP/2 session, which fails its calls; nothing else to do.
    stream.on("error", () => {});
    if (closing || stream.destroyed) {
      stream.destroy();
      return;
    }
    const running = new Set<grpc.ServerInterceptingCall>();
    const injector = server.createConnectionInjector(
      grpc.experimental.createServerCredentialsWithInterceptors(credentials, [interceptorFor(peer, running)]),
    );
    served.set(stream, { stream, injector, running, draining: undefined });
    stream.once("close", () => {
      served.delete(stream);
      injector.destroy();
    });
    injector.injectConnection(stream);
  }

  function drain(stream: Duplex, graceMs = DEFAULT_GRACE_MS): Promise<void> {
    const entry = served.get(stream);
    if (!entry) return Promise.resolve();
    entry.draining ??= drainServed(entry, graceMs);
    return entry.draining;
  }

  return {
    inject,
    drain,
    peerOf: (call) => peers.get(call.metadata),
    get streams() {
      return served.size;
    },
    close(graceMs = DEFAULT_GRACE_MS) {
      closing ??= Promise.all([...served.keys()].map((s) => drain(s, graceMs))).then(() => {});
      return closing;
    },
  };
}
