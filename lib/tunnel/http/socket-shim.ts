import type { Duplex } from "node:stream";

/**
 * Who is on the other end of a tunnelled stream, in the shape `net.Socket` reports it, so that
 * `req.socket.remoteAddress` and friends say something useful in logs and access checks.
 */
export interface StreamPeer {
  remoteAddress?: string;
  remotePort?: number;
  remoteFamily?: string;
  localAddress?: string;
  localPort?: number;
}

/** The part of `net.Socket` that node:http, undici and ws call on a connection beyond `Duplex`. */
export interface SocketLike extends StreamPeer {
  timeout?: number;
  setTimeout(ms: number, callback?: () => void): this;
  setNoDelay(noDelay?: boolean): this;
  setKeepAlive(enable?: boolean, initialDelay?: number): this;
  ref(): this;
  unref(): this;
  destroySoon(): void;
  address(): { address?: string; port?: number; family?: string };
}

/**
 * After our FIN, how long a half-closed stream waits for the peer's FIN before it is reset.
 * A peer that never closes its side would otherwise hold the stream forever.
 */
export const LINGER_MS = 30_000;

const kShimmed = Symbol("tunnel.http.socketShim");

/**
 * Lets a plain Duplex (a tunnel stream) stand where node:http, undici and ws expect a
 * `net.Socket`. Only what the Duplex lacks is added, as own properties, so a real socket passes
 * through untouched and the stream object keeps its identity (upgrade handlers get it back).
 *
 * Why each piece exists:
 * - `setTimeout` + `'timeout'`: node:http's server arms keep-alive and `server.timeout` with it
 *   (`_http_server.js` resOnFinish / connectionListener), `res.setTimeout` forwards to it, and
 *   ws calls `setTimeout(0)` on upgrade. It is a real idle timer reset by reads and writes, as
 *   on `net.Socket`, so node:http's keep-alive timeout closes idle tunnelled streams.
 * - `setNoDelay`, `setKeepAlive`: ws calls `setNoDelay()` unguarded; Nagle and TCP keepalive
 *   belong to the tunnel's own connection, so these do nothing.
 * - `ref`, `unref`: undici unrefs an idle connection's socket. A stream holds no event-loop
 *   handle (the tunnel's socket does), so these do nothing.
 * - `destroySoon`: node:http calls it after a `Connection: close` response. `net.Socket`
 *   destroys once its FIN is flushed; a tunnel stream's `destroy()` is a reset, which may discard
 *   the response the peer has not read yet, so this only ends (FIN) and lets the stream close
 *   when the peer's FIN arrives, resetting it after {@link LINGER_MS} if that never happens.
 * - `remoteAddress` & co., `address()`: read by applications and by undici error messages.
 *
 * `allowHalfOpen: false` makes the stream end its side once the peer's FIN arrives, as a
 * `net.connect()` socket does. undici relies on that after an upgrade: its WebSocket client waits
 * for the server to close the connection and never ends it itself. node:http's server sockets are
 * half-open (node:http ends them itself), so the server side leaves this unset.
 */
export function asSocket<T extends Duplex>(
  stream: T,
  peer: StreamPeer = {},
  options: { allowHalfOpen?: boolean } = {},
): T & SocketLike {
  const shimmed = stream as T & SocketLike;
  const s = stream as Duplex as Duplex & SocketLike & { [kShimmed]?: true };
  if (options.allowHalfOpen !== undefined) s.allowHalfOpen = options.allowHalfOpen;
  if (s[kShimmed]) return shimmed;
  Object.defineProperty(s, kShimmed, { value: true });

  for (const [key, value] of Object.entries(peer)) {
    if (value !== undefined && !(key in s)) Object.defineProperty(s, key, { value, enumerable: true });
  }
  if (typeof s.setTimeout !== "function") addIdleTimer(s);
  if (typeof s.setNoDelay !== "function") s.setNoDelay = () => s;
  if (typeof s.setKeepAlive !== "function") s.setKeepAlive = () => s;
  if (typeof s.ref !== "function") s.ref = () => s;
  if (typeof s.unref !== "function") s.unref = () => s;
  if (typeof s.destroySoon !== "function") s.destroySoon = () => endThenLinger(s);
  if (typeof s.address !== "function") {
    s.address = () => ({ address: peer.localAddress, port: peer.localPort, family: peer.remoteFamily });
  }
  return shimmed;
}

/** `net.Socket#setTimeout` semantics: 'timeout' after `ms` without reads or writes. */
function addIdleTimer(s: Duplex & SocketLike): void {
  let timer: NodeJS.Timeout | undefined;
  const touch = () => timer?.refresh();
  const push = s.push;
  s.push = (chunk: unknown, encoding?: BufferEncoding) => {
    touch();
    return push.call(s, chunk, encoding);
  };
  const write = s.write as (...args: unknown[]) => boolean;
  s.write = ((...args: unknown[]) => {
    touch();
    return write.apply(s, args);
  }) as typeof s.write;
  s.setTimeout = (ms: number, callback?: () => void) => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    s.timeout = ms;
    if (callback) {
      if (ms === 0) s.removeListener("timeout", callback);
      else s.once("timeout", callback);
    }
    if (ms > 0 && !s.destroyed) {
      timer = setTimeout(() => s.emit("timeout"), ms);
      timer.unref();
    }
    return s;
  };
  s.once("close", () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  });
}

function endThenLinger(s: Duplex): void {
  if (s.destroyed) return;
  if (s.writable) s.end();
  const linger = setTimeout(() => s.destroy(), LINGER_MS);
  linger.unref();
  s.once("close", () => clearTimeout(linger));
}
