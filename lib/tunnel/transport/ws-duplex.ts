import { Duplex } from "node:stream";
import { WebSocket } from "ws";
import type { MessagePath } from "../yamux/message-path.ts";
import { CloseCode } from "./constants.ts";
import { ConnectionClosedError, TransportError } from "./errors.ts";
import type { GatedInput, InboundGate } from "./inbound-gate.ts";
import { binaryFrame, SMALL_FRAME_MAX } from "./ws-frame.ts";

export interface BinaryDuplex {
  stream: Duplex;
  /** The yamux session's shortcuts past `stream` (lib/tunnel/yamux/message-path.ts). */
  messages: MessagePath;
}

export interface BinaryDuplexControl {
  /** True once this end started the closing handshake: the peer's echo is then a clean end. */
  closedLocally(): boolean;
  /** Starts the closing handshake (idempotent). */
  close(code: number, reason: string): void;
}

/**
 * A byte stream over an open WebSocket, modelled on ws' `createWebSocketStream` but binary-only.
 * That helper cannot be used as is: it pushes text messages into the stream as if they were bytes,
 * and it ends the stream cleanly whatever the close code, so a 1003/1009/1006 would look like EOF.
 *
 * - Each chunk written becomes one binary message; the write completes when ws has handed the frame
 *   to the socket, so at most the Duplex's high-water mark plus one message sits above the socket.
 * - Each binary message becomes one readable chunk; when the reader lags, the WebSocket is paused.
 * - A text message closes the connection with 1003 and errors the stream.
 * - A close with 1000/1001/1005 (or one this end started) ends the stream; any other code errors it.
 * - `end()` runs the closing handshake; `destroy()` drops the connection.
 * - With a `gate` (an accepting end), a new connection's messages to the yamux session may wait for
 *   a later turn of the event loop (inbound-gate.ts), the WebSocket paused meanwhile.
 * Must be created synchronously on 'open' so no message is emitted before the listener exists.
 */
export function createBinaryDuplex(
  ws: WebSocket,
  control: BinaryDuplexControl,
  gate?: InboundGate,
): BinaryDuplex {
  // When ws reports an error it has already started closing (with the right code); terminating
  // on destroy would cut the close frame off.
  let terminateOnDestroy = true;
  const resumeWs = () => {
    if (ws.isPaused) ws.resume();
  };
  let refused = false;

  const duplex = new Duplex({
    allowHalfOpen: false,
    decodeStrings: true,
    objectMode: false,
    read() {
      resumeWs();
    },
    write(chunk: Buffer, _encoding, callback) {
      if (ws.readyState !== WebSocket.OPEN) return callback(notOpen(ws));
      ws.send(chunk, { binary: true }, callback);
    },
    writev(chunks, callback) {
      if (ws.readyState !== WebSocket.OPEN) return callback(notOpen(ws));
      // One socket write for the batch instead of one per message. yamux hands a large payload
      // over with its 12-byte header as two chunks (so as not to copy the payload): uncorked, each
      // was its own syscall (and, on loopback, its own delivery to the peer). In bench:tunnel
      // (2 cores, shared) 8 streams went from 0.68-0.81x of raw WebSockets to 0.97-1.02x, one
      // stream from 0.61-0.91x to 0.69-0.89x.
      const socket = socketOf(ws);
      socket?.cork();
      const last = chunks.length - 1;
      for (let i = 0; i <= last; i++) {
        ws.send(chunks[i]!.chunk as Buffer, { binary: true }, i === last ? callback : undefined);
      }
      socket?.uncork();
    },
    final(callback) {
      if (ws.readyState === WebSocket.CLOSED) return callback();
      ws.once("close", () => callback());
      control.close(CloseCode.normal, "");
    },
    destroy(err, callback) {
      gated?.drop();
      if (terminateOnDestroy && ws.readyState !== WebSocket.CLOSED) ws.terminate();
      callback(err);
    },
  });

  /** Set by messages.receive(): inbound messages skip the readable side. */
  let receiver: ((message: Buffer) => void) | undefined;
  /** With a gate, set with `receiver`: the way messages reach it. */
  let gated: GatedInput | undefined;
  // Read once: ws sets both before 'open', and this is created on 'open'.
  const socket = socketOf(ws);
  const masked = !isServerEnd(ws);
  const messages: MessagePath = {
    receive(onMessage) {
      // As a 'data' listener would, the messages buffered so far come on the next tick, once
      // whoever asked has set up the rest of its listeners.
      process.nextTick(() => {
        for (let m = duplex.read() as Buffer | null; m !== null; m = duplex.read() as Buffer | null) {
          onMessage(m);
        }
        receiver = onMessage;
        gated = gate?.open(
          (m) => {
            if (!duplex.destroyed) onMessage(m);
          },
          () => ws.pause(),
          resumeWs,
        );
        duplex.resume(); // flowing, and empty: 'end' still comes when the peer closes
        resumeWs();
      });
    },
    sendNow(message) {
      if (ws.readyState !== WebSocket.OPEN || duplex.writableLength > 0 || duplex.writableCorked > 0)
        return false;
      // bufferedAmount: bytes in ws' own queue and in the socket's, not yet taken by the kernel.
      if (duplex.writableEnded || duplex.destroyed || ws.bufferedAmount > 0) return false;
      // Nothing is queued in ws or the socket, so a frame written to the socket directly keeps its
      // place; a small one is framed here, in one buffer (see binaryFrame).
      if (socket !== undefined && message.length <= SMALL_FRAME_MAX)
        socket.write(binaryFrame(message, masked));
      else ws.send(message, BINARY);
      return true;
    },
  };

  ws.on("message", (data: Buffer, isBinary: boolean) => {
    if (refused) return;
    if (!isBinary) {
      refused = true;
      terminateOnDestroy = false;
      control.close(CloseCode.unsupportedData, "binary messages only");
      duplex.destroy(
        new TransportError(
          "PROTOCOL",
          "peer sent a text message; the tunnel carries binary messages only (closed with 1003)",
        ),
      );
      return;
    }
    if (receiver !== undefined) {
      if (duplex.destroyed) return;
      if (gated === undefined) receiver(data);
      else {
        gated.push(data);
        if (gated.settled) gated = undefined; // nothing of the gate's kept for the tunnel's lifetime
      }
    } else if (!duplex.push(data)) ws.pause();
  });

  ws.once("error", (err: Error & { code?: string }) => {
    terminateOnDestroy = false;
    if (duplex.destroyed) return;
    const message =
      err.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH"
        ? `peer sent a message larger than the limit (${err.message}; closed with 1009)`
        : `WebSocket protocol error: ${err.message}`;
    duplex.destroy(new TransportError("PROTOCOL", message, { cause: err }));
  });

  ws.on("close", (code: number, reason: Buffer) => {
    if (duplex.destroyed) return;
    const clean =
      control.closedLocally() ||
      code === CloseCode.normal ||
      code === CloseCode.goingAway ||
      code === CloseCode.noStatus;
    // What the peer sent before its connection ended reaches the session first, as it would ungated.
    gated?.flush();
    if (clean) duplex.push(null);
    else duplex.destroy(new ConnectionClosedError(code, reason.toString()));
  });

  return { stream: duplex, messages };
}

const BINARY = { binary: true };

function notOpen(ws: WebSocket): TransportError {
  const state = ws.readyState === WebSocket.CLOSING ? "closing" : "closed";
  return new TransportError("CLOSED", `cannot write: the WebSocket is ${state}`);
}

/** ws keeps the stream it runs on in `_socket` (set by its client, `handleUpgrade` and `setSocket`). */
function socketOf(ws: WebSocket): Duplex | undefined {
  const socket = (ws as unknown as { _socket?: unknown })._socket;
  return socket instanceof Duplex ? socket : undefined;
}

/** ws' `_isServer` (see ws-over-stream.ts): a server's frames go unmasked, a client's masked. */
function isServerEnd(ws: WebSocket): boolean {
  return (ws as unknown as { _isServer: boolean })._isServer === true;
}
