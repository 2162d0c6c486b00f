import type { Readable } from "node:stream";
import { onTestFinished } from "vitest";
import {
  type DialOptions,
  dial,
  type ListenOptions,
  listen,
  type TransportConnection,
  type TunnelListener,
} from "../../../lib/tunnel/transport/index.ts";
import { testPki } from "../../support/tls-certs.ts";
import { within } from "../../support/until.ts";

/** The four ways a tunnel can be carried. */
export const VARIANTS = [
  { name: "HTTP/1.1 cleartext", tls: false, http2: false },
  { name: "HTTP/1.1 TLS", tls: true, http2: false },
  { name: "HTTP/2 TLS (RFC 8441)", tls: true, http2: true },
  { name: "HTTP/2 cleartext h2c (RFC 8441)", tls: false, http2: true },
] as const;

export type Variant = (typeof VARIANTS)[number];

/** Collects exactly `n` bytes from a flowing stream. */
export function readBytes(stream: Readable, n: number, ms = 10_000): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const done = new Promise<Buffer>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= n) {
        stream.removeListener("data", onData);
        stream.pause();
        resolve(Buffer.concat(chunks));
      }
    };
    stream.on("data", onData);
    stream.once("error", reject);
    stream.once("end", () => reject(new Error(`stream ended after ${size} of ${n} bytes`)));
  });
  return within(done, ms, `${n} bytes`);
}

/** The next 'error' of an emitter. */
export function nextError(emitter: NodeJS.EventEmitter, ms = 5000): Promise<Error & Record<string, unknown>> {
  return within(new Promise((resolve) => emitter.once("error", resolve)), ms, "an error");
}

/** A FIFO of accepted connections. */
export class Accepted<I> {
  readonly #items: TransportConnection<I>[] = [];
  readonly #waiters: Array<(c: TransportConnection<I>) => void> = [];

  push = (connection: TransportConnection<I>): void => {
    // Tests that expect errors listen for them; the rest must not crash on teardown resets.
    connection.stream.on("error", () => {});
    const waiter = this.#waiters.shift();
    if (waiter) waiter(connection);
    else this.#items.push(connection);
  };

  next(ms = 5000): Promise<TransportConnection<I>> {
    const item = this.#items.shift();
    if (item) return Promise.resolve(item);
    return within(new Promise((resolve) => this.#waiters.push(resolve)), ms, "an accepted connection");
  }
}

export interface TestServer<I> {
  listener: TunnelListener<I>;
  accepted: Accepted<I>;
  url: string;
  /** Dial options that trust the test CA and pick the variant's HTTP version. */
  dialOptions: DialOptions;
}

/** Starts a listener on 127.0.0.1 that is closed when the test finishes. */
export async function startServer<I = undefined>(
  variant: { tls: boolean; http2?: boolean },
  options: Partial<ListenOptions<I>> = {},
): Promise<TestServer<I>> {
  const pki = variant.tls ? await testPki() : undefined;
  const accepted = new Accepted<I>();
  const onConnection = options.onConnection;
  const listener = await listen<I>({
    host: "127.0.0.1",
    ...options,
    tls: pki ? { cert: pki.cert, key: pki.key } : undefined,
    onConnection: (connection) => {
      onConnection?.(connection);
      accepted.push(connection);
    },
  });
  onTestFinished(() => listener.close(1000));
  return {
    listener,
    accepted,
    url: listener.url,
    dialOptions: { http2: variant.http2 ?? false, ca: pki?.caCert, proxy: false, handshakeTimeoutMs: 5000 },
  };
}

/** Dials and makes sure the connection is gone when the test finishes. */
export async function dialed(url: string, options: DialOptions): Promise<TransportConnection> {
  const connection = await dial(url, options);
  connection.stream.on("error", () => {});
  onTestFinished(() => connection.destroy());
  return connection;
}
