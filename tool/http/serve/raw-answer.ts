import { type OutgoingHttpHeaders, STATUS_CODES } from "node:http";
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
  const head = responseHead(status, STATUS_CODES[status] ?? "Error", {
    ...headers,
    "content-type": type,
    "content-length": Buffer.byteLength(body),
    connection: "close",
  });
  // Whatever the client still sends is dropped; reading on is what lets its close end the socket.
  socket.resume();
  socket.end(`${head}${body}`);
}

/** An HTTP/1.1 response head, blank line included, for raw connections (upgrades, relayed answers). */
export function responseHead(status: number, message: string, headers: OutgoingHttpHeaders): string {
  const lines = Object.entries(headers).flatMap(([name, value]) =>
    value === undefined ? [] : (Array.isArray(value) ? value : [value]).map((v) => `${name}: ${v}\r\n`),
  );
  return `HTTP/1.1 ${status} ${message}\r\n${lines.join("")}\r\n`;
}
