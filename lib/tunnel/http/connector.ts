import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { type buildConnector, errors } from "undici";
import { drainingSignalOf } from "../session/stream-draining.ts";
import { asSocket } from "./socket-shim.ts";
import type { StreamSlots } from "./stream-slots.ts";

/**
 * Opens one byte stream to `origin` (e.g. `"http://kubernetes.default.svc"`) through the tunnel.
 * The scheme and host are routing information for the far side: the stream itself carries plain
 * HTTP/1.1 (the tunnel provides the encryption). Abort `signal` to give up.
 */
export type OpenOriginStream = (origin: string, options: { signal: AbortSignal }) => Duplex | Promise<Duplex>;

/**
 * An undici `connect` function whose "sockets" are tunnel streams: it waits for a free slot
 * under the stream cap, calls `open`, and fails with undici's ConnectTimeoutError when both
 * together take longer than `timeoutMs`.
 */
export function tunnelConnector(
  open: OpenOriginStream,
  slots: StreamSlots,
  timeoutMs: number,
): buildConnector.connector {
  return ({ protocol, host }, callback) => {
    const origin = `${protocol}//${host}`;
    const abort = new AbortController();
    const timer = setTimeout(
      () => abort.abort(new errors.ConnectTimeoutError(`opening a tunnel stream to ${origin} timed out`)),
      timeoutMs,
    );
    openStream(origin, open, slots, abort.signal).then(
      (stream) => {
        clearTimeout(timer);
        // undici types its sockets as net.Socket; the shim supplies what it calls beyond Duplex.
        callback(null, stream as unknown as Socket);
      },
      (err: unknown) => {
        clearTimeout(timer);
        callback(err instanceof Error ? err : new Error(String(err)), null);
      },
    );
  };
}

async function openStream(
  origin: string,
  open: OpenOriginStream,
  slots: StreamSlots,
  signal: AbortSignal,
): Promise<Duplex> {
  const slot = await slots.acquire(signal);
  let stream: Duplex;
  try {
    stream = await open(origin, { signal });
  } catch (err) {
    slot.release();
    throw err;
  }
  if (stream.closed) slot.release();
  else stream.once("close", () => slot.release());
  if (signal.aborted) {
    stream.destroy();
    throw signal.reason;
  }
  const draining = drainingSignalOf(stream);
  const socket = asSocket(stream, {}, { allowHalfOpen: false });
  slot.onEvict(() => socket.destroy());
  // undici unrefs a connection's socket when its client has nothing queued and refs it when a
  // request arrives (client-h1 resumeH1): that is the idle signal for evicting under the cap, and
  // for retiring a connection whose tunnel drains.
  let idle = false;
  // Once the stream's tunnel drains, the connection is closed as soon as it is idle, never while a
  // request is on it: the next request opens a stream on another tunnel instead of riding this
  // one until the drain's grace period cuts it. Checked on the next turn, as undici may still be
  // dispatching from the call that unref'd it.
  const retireIfIdle = () =>
    setImmediate(() => {
      if (idle && !socket.destroyed) socket.destroy();
    });
  if (draining && !draining.aborted) {
    draining.addEventListener("abort", retireIfIdle, { once: true });
    socket.once("close", () => draining.removeEventListener("abort", retireIfIdle));
  }
  const { ref, unref } = socket;
  socket.unref = () => {
    idle = true;
    slot.idle();
    if (draining?.aborted) retireIfIdle();
    return unref.call(socket);
  };
  socket.ref = () => {
    idle = false;
    slot.busy();
    return ref.call(socket);
  };
  return socket;
}
