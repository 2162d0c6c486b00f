// The gRPC floor's stream: a TCP socket behind a plain JS Duplex. node:http2 runs over a socket's
// native handle; given any other Duplex (a tunnel stream) it wraps it in a JSStreamSocket, and every
// read and write crosses JavaScript. This measures that wrapping alone: no yamux, no WebSocket.
import type { Socket } from "node:net";
import { Duplex } from "node:stream";

/** `socket` as a Duplex without a handle; a write completes once handed to the socket, as a tunnel stream's does. */
export function jsStreamOver(socket: Socket): Duplex {
  socket.setNoDelay(true);
  const stream = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _enc, callback) {
      socket.write(chunk);
      callback();
    },
    writev(chunks, callback) {
      // One write for the batch, as a tunnel stream sends a small batch as one frame.
      socket.write(
        chunks.length === 1 ? chunks[0]!.chunk : Buffer.concat(chunks.map((c) => c.chunk as Buffer)),
      );
      callback();
    },
    final(callback) {
      socket.end();
      callback();
    },
    destroy(err, callback) {
      socket.destroy();
      callback(err);
    },
  });
  socket.on("data", (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.on("end", () => stream.push(null));
  socket.on("error", (err) => stream.destroy(err));
  return stream;
}
