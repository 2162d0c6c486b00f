import type { Duplex } from "node:stream";
import { WebSocket } from "ws";

/**
 * The one place that reaches into `ws` internals.
 *
 * `ws` has no public API to run a WebSocket over a stream whose HTTP handshake someone else did,
 * which RFC 8441 (WebSocket over an HTTP/2 stream, which `ws` does not support at all) needs on
 * both ends: its own server does `new WebSocket(null)` then `setSocket(socket, head, options)`, and
 * so does this. (HTTP/1.1 upgrades use ws' public `WebSocketServer#handleUpgrade`.)
 * test/tunnel/transport/ws-internals.test.ts fails, naming what moved, when ws changes them. Three private fields matter:
 * - `_isServer` decides masking: a client masks what it sends and the receiver insists on the mirror
 *   image, so the HTTP/2 client end must flip it (`new WebSocket(null)` always makes a server end);
 * - `_protocol` is what `ws.protocol` reports (its handshake code would set it);
 * - `setSocket` wires the Receiver/Sender to the stream and emits 'open'.
 *
 * An `Http2Stream` is a `Duplex` and needs no wrapper: `ws` calls `setTimeout`/`setNoDelay` only if
 * present (Http2Stream has `setTimeout`; Nagle is already off on the session's socket, Node sets it for
 * HTTP/2), and everything else it uses (`pause`, `resume`, `unshift`, `end`, `destroy`, `cork`,
 * `_writableState.length` for `bufferedAmount`, 'data'/'end'/'close'/'error') is plain Duplex.
 * ws' default close timeout (30 s) bounds a closing handshake the peer never answers.
 */
interface WebSocketInternals {
  _isServer: boolean;
  _protocol: string;
  setSocket(
    socket: Duplex,
    head: Buffer,
    options: {
      allowSynchronousEvents: boolean;
      maxBufferedChunks: number;
      maxFragments: number;
      maxPayload: number;
      skipUTF8Validation: boolean;
    },
  ): void;
}

export interface StreamWebSocketOptions {
  role: "client" | "server";
  /** The negotiated subprotocol. */
  protocol: string;
  maxPayload: number;
  /** Bytes already read past the HTTP/1.1 handshake. */
  head?: Buffer;
}

/** ws' constructor with a null address (the @types omit the options argument of that form). */
type ServerSideConstructor = new (address: null, protocols: undefined, options: object) => WebSocket;

const EMPTY = Buffer.alloc(0);

/** Opens a WebSocket on a stream whose handshake already succeeded. Emits 'open' synchronously. */
export function openWebSocketOnStream(socket: Duplex, options: StreamWebSocketOptions): WebSocket {
  // Same per-connection defaults as ws' own server and client.
  const ws = new (WebSocket as unknown as ServerSideConstructor)(null, undefined, {
    autoPong: true,
    maxPendingAutoPongs: 60,
    closeTimeout: 30_000,
  });
  const internals = ws as unknown as WebSocketInternals;
  assertInternals(internals);
  internals._isServer = options.role === "server";
  internals._protocol = options.protocol;
  internals.setSocket(socket, options.head ?? EMPTY, {
    allowSynchronousEvents: true,
    maxBufferedChunks: 256 * 1024,
    maxFragments: 16 * 1024,
    maxPayload: options.maxPayload,
    skipUTF8Validation: false,
  });
  return ws;
}

/** Fails loudly, naming what moved, rather than misbehaving when a `ws` release changes these. */
export function assertInternals(ws: object): void {
  const w = ws as Partial<WebSocketInternals>;
  if (typeof w.setSocket !== "function") throw internalsMoved("WebSocket#setSocket is no longer a method");
  if (typeof w._isServer !== "boolean")
    throw internalsMoved("WebSocket#_isServer is no longer a boolean field");
  if (!("_protocol" in w)) throw internalsMoved("WebSocket#_protocol is gone");
}

function internalsMoved(what: string): Error {
  return new Error(
    `the installed ws no longer has the internals RFC 8441 tunnels rely on: ${what} (see ws-over-stream.ts)`,
  );
}
