import type { Http2Session } from "node:http2";
import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { DEFAULT_GRACE_MS } from "../session/grace.ts";
import { injectorServer } from "./grpc-js-internals.ts";

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

interface Served<P> {
  stream: Duplex;
  peer: P | undefined;
  /** The HTTP/2 session the shared http2 server made for this stream. */
  session: Http2Session | undefined;
  /** With TLS credentials: this stream's own injector (see `inject`). */
  injector: grpc.ConnectionInjector | undefined;
  /** Calls on this connection that have not ended yet. */
  running: Set<grpc.ServerInterceptingCall>;
  draining: Promise<void> | undefined;
}

async function drainServed<P>(
  { stream, session, injector, running }: Served<P>,
  graceMs: number,
): Promise<void> {
  if (stream.closed) return;
  const closed = new Promise<void>((resolve) => stream.once("close", () => resolve()));
  // GOAWAY now (as grpc-js' injector drain does); a cut (RST_STREAM CANCEL, read as CANCELLED)
  // only as a backstop.
  if (injector) injector.drain(graceMs + BACKSTOP_MS);
  else if (session && !session.closed && !session.destroyed) session.close();
  const cancel = setTimeout(() => session?.destroy(), graceMs + BACKSTOP_MS);
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
  clearTimeout(cancel);
  clearTimeout(cut);
}

/**
 * Serves a grpc-js Server on accepted Duplex streams (no listening socket), one HTTP/2
 * connection per stream, every connection on one shared `node:http2` server (one connection
 * injector): a server per stream cost tens of KiB per agent.
 *
 * Which peer a call came over: each stream gets a name of its own as its `remoteAddress` (streams
 * have no address; a socket keeps its own), which grpc-js reports as the call's peer; the shared
 * injector's credentials carry an interceptor that finds the stream by that name and tags the
 * call's incoming Metadata object with the stream's peer. Handlers see that same Metadata object
 * as `call.metadata`, so `peerOf(call)` cannot be forged by anything the remote sends. A server
 * interceptor that replaces (rather than passes on) the Metadata object hides the peer. The same
 * interceptor keeps the stream's running calls, so a drain can end them with a status. With TLS
 * credentials each stream gets an http2 server of its own (its session comes after the handshake).
 */
export function createGrpcStreamServer<P = unknown>(
  server: grpc.Server,
  opts: GrpcStreamServerOptions = {},
): GrpcStreamServer<P> {
  const credentials = opts.credentials ?? grpc.ServerCredentials.createInsecure();
  const peers = new WeakMap<grpc.Metadata, P | undefined>();
  const served = new Map<Duplex, Served<P>>();
  /** By the name grpc-js reports as a call's peer. */
  const byName = new Map<string, Served<P>>();
  let nextId = 0;
  let closing: Promise<void> | undefined;
  let shared: ReturnType<typeof injectorServer> | undefined;
  /** Set by the shared http2 server's "session" event, inside injectConnection. */
  let justMade: Http2Session | undefined;
  /** The name the session being made gets as its peer's address, if the stream has none. */
  let naming: string | undefined;

  /** Tags each call with its stream's peer and keeps it in `running` until its status is sent or it is cancelled. */
  const interceptorFor =
    (find: (next: grpc.ServerInterceptingCallInterface) => Served<P> | undefined): grpc.ServerInterceptor =>
    (_method, next) => {
      const entry = find(next);
      // Methods, not arrow functions in properties: tsx (esbuild keepNames) names each of those
      // with a defineProperty call, four per call here.
      const call: grpc.ServerInterceptingCall = new grpc.ServerInterceptingCall(next, {
        start(proceed) {
          entry?.running.add(call);
          proceed({
            onReceiveMetadata(metadata, nextMetadata) {
              peers.set(metadata, entry?.peer);
              nextMetadata(metadata);
            },
            onCancel() {
              entry?.running.delete(call);
            },
          });
        },
        sendStatus(status, nextStatus) {
          entry?.running.delete(call);
          nextStatus(status);
        },
      });
      return call;
    };

  function sharedInjector(): ReturnType<typeof injectorServer> {
    if (shared) return shared;
    shared = injectorServer(
      server,
      grpc.experimental.createServerCredentialsWithInterceptors(credentials, [
        interceptorFor((next) => byName.get(next.getPeer())),
      ]),
    );
    shared.http2Server.on("session", (session: Http2Session) => {
      justMade = session;
      // node:http2 wraps a stream that is not a socket in a socket of its own, whose address
      // (net.Socket's remoteAddress) is read from `_peername` when its handle has none.
      if (naming !== undefined)
        (session.socket as unknown as { _peername: object })._peername = { address: naming };
    });
    return shared;
  }

  /**
   * The name grpc-js will report as the peer of calls on `stream` (its getPeer()): a socket's own
   * address, else a name of its own, given to the session's socket as it is made.
   */
  function nameOf(stream: Duplex): { name: string; given: boolean } {
    const s = stream as Duplex & { remoteAddress?: string; remotePort?: number };
    if (s.remoteAddress) {
      return { name: s.remotePort ? `${s.remoteAddress}:${s.remotePort}` : s.remoteAddress, given: false };
    }
    return { name: `grpc-stream-${++nextId}`, given: true };
  }

  function inject(stream: Duplex, peer?: P): void {
    // Errors (a peer reset) end the HTTP/2 session, which fails its calls; nothing else to do.
    stream.on("error", () => {});
    if (closing || stream.destroyed) {
      stream.destroy();
      return;
    }
    const entry: Served<P> = {
      stream,
      peer,
      session: undefined,
      injector: undefined,
      running: new Set(),
      draining: undefined,
    };
    if (credentials._isSecure()) {
      // TLS inside the stream: the session comes after the handshake, not inside injectConnection,
      // so the stream gets an injector (an http2 server) of its own, which knows its peer.
      entry.injector = server.createConnectionInjector(
        grpc.experimental.createServerCredentialsWithInterceptors(credentials, [interceptorFor(() => entry)]),
      );
      served.set(stream, entry);
      stream.once("close", () => {
        served.delete(stream);
        entry.injector?.destroy();
      });
      entry.injector.injectConnection(stream);
      return;
    }
    const { name, given } = nameOf(stream);
    served.set(stream, entry);
    byName.set(name, entry);
    stream.once("close", () => {
      served.delete(stream);
      if (byName.get(name) === entry) byName.delete(name);
      // The session ends with its stream; one still open (a half-closed stream) goes now.
      if (entry.session && !entry.session.destroyed) entry.session.destroy();
    });
    const { injector } = sharedInjector();
    justMade = undefined;
    naming = given ? name : undefined;
    try {
      injector.injectConnection(stream);
    } finally {
      naming = undefined;
    }
    entry.session = justMade;
    justMade = undefined;
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
      closing ??= Promise.all([...served.keys()].map((s) => drain(s, graceMs))).then(() => {
        shared?.injector.destroy();
      });
      return closing;
    },
  };
}
