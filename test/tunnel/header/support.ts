import { once } from "node:events";
import net from "node:net";
import type { Readable } from "node:stream";
import { Session } from "../../../lib/tunnel/yamux/index.ts";

/** Two yamux sessions over a loopback TCP connection, keepalive off. */
export async function sessionPair(): Promise<{ client: Session; server: Session; close(): void }> {
  const listener = net.createServer();
  listener.listen(0, "127.0.0.1");
  await once(listener, "listening");
  const { port } = listener.address() as net.AddressInfo;
  const accepted = once(listener, "connection") as Promise<[net.Socket]>;
  const dialed = net.connect(port, "127.0.0.1");
  const [[inbound]] = await Promise.all([accepted, once(dialed, "connect")]);
  listener.close();
  for (const s of [dialed, inbound]) s.setNoDelay(true);
  const client = new Session(dialed, { client: true, keepAliveIntervalMs: 0 });
  const server = new Session(inbound, { client: false, keepAliveIntervalMs: 0 });
  return {
    client,
    server,
    close() {
      client.close();
      server.close();
    },
  };
}

/**
 * Everything the readable yields until it ends. Not `for await`: finishing the iterator destroys
 * the stream, which would reset a Duplex whose writable side is still in use.
 */
export function readAll(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("end", () => resolve(Buffer.concat(chunks)));
    stream.once("error", reject);
  });
}

/** Resolves once the stream has closed (any cause); rejects after `ms`. */
export function closed(stream: Readable, ms: number): Promise<void> {
  if (stream.closed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`stream not closed within ${ms} ms`)), ms);
    stream.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
