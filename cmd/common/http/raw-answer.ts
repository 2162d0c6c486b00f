import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";

/** A response body and its media type. */
export interface Body {
  type: string;
  body: string;
}

/** Answers on a raw connection (an Upgrade request: node:http gives no response object there) and closes it. */
export function rawAnswer(
  socket: Duplex,
  status: number,
  { type, body }: Body,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (!socket.writable) return void socket.destroy();
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    `content-type: ${type}`,
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close",
  ];
  // Whatever the client still sends is dropped; reading on is what lets its close end the socket.
  socket.resume();
  socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
}
