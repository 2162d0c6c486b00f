import type { Duplex } from "node:stream";
import type { ProxyFailure } from "./failure.ts";

/** An error answer on a connection that asked for an Upgrade (node:http gives no response object there). */
export function rawError(
  socket: Duplex,
  f: ProxyFailure,
  body = `${JSON.stringify({ error: f.message })}\n`,
  type = "application/json",
): void {
  if (!socket.writable) return void socket.destroy();
  socket.end(
    `HTTP/1.1 ${f.status} ${f.reason}\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
