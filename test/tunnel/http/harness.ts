import { createCipheriv, createHash } from "node:crypto";
import { once } from "node:events";
import type { Server } from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { Agent, buildConnector, type Dispatcher } from "undici";
import { type HttpStreamServer, serveHttp, TunnelDispatcher } from "../../../lib/tunnel/http/index.ts";
import { sha256Of } from "../../support/digest.ts";
import { sessionPair, socketPair } from "../../support/loopback.ts";

export { sha256Of };

/** Connections seen from one side: how many are open now, at most, and in total. */
export class Connections {
  open = 0;
  peak = 0;
  readonly all: Duplex[] = [];
  /** Errors the connections ended with (a reset stream reports ECONNRESET). */
  readonly errors: Array<NodeJS.ErrnoException> = [];

  track(conn: Duplex): void {
    this.all.push(conn);
    this.open++;
    this.peak = Math.max(this.peak, this.open);
    conn.once("close", () => this.open--);
    conn.on("error", (err) => this.errors.push(err));
  }
}

export interface RigOptions {
  maxStreams?: number;
  idleTimeoutMs?: number;
  connectTimeoutMs?: number;
}

/**
 * An HTTP server and a dispatcher reaching it: either through the tunnel (TunnelDispatcher ->
 * yamux stream -> serveHttp, one loopback TCP connection carrying the session) or directly
 * (undici Agent -> TCP -> the same kind of node:http server), so every check runs on both.
 */
export interface Rig {
  readonly kind: "tunnel" | "direct";
  readonly server: Server;
  readonly dispatcher: Dispatcher;
  /** Connections (streams or sockets) as the client opened them, and as the server accepted them. */
  readonly client: Connections;
  readonly accepted: Connections;
  /** Origins the client asked to open, in order (tunnel only; direct has one). */
  readonly origins: string[];
  url(path: string, origin?: string): string;
  /** A raw byte stream to the server, bypassing the dispatcher. */
  rawConnect(): Promise<Duplex>;
  close(): Promise<void>;
}

export const TUNNEL_ORIGIN = "http://backend.test";

export async function tunnelRig(
  server: Server,
  opts: RigOptions = {},
): Promise<Rig & { served: HttpStreamServer }> {
  const sessions = await sessionPair();
  const { client: clientSession, server: serverSession } = sessions;
  const b = sessions.sockets[1];
  const served = serveHttp(server);
  const client = new Connections();
  const accepted = new Connections();
  const origins: string[] = [];
  serverSession.on("stream", (stream) => {
    accepted.track(stream);
    served.handle(stream, { remoteAddress: b.remoteAddress, remotePort: b.remotePort });
  });
  const dispatcher = new TunnelDispatcher(
    async (origin) => {
      origins.push(origin);
      const stream = await clientSession.open();
      client.track(stream);
      return stream;
    },
    {
      maxStreams: opts.maxStreams,
      idleTimeoutMs: opts.idleTimeoutMs,
      connectTimeoutMs: opts.connectTimeoutMs,
    },
  );
  return {
    kind: "tunnel",
    server,
    served,
    dispatcher,
    client,
    accepted,
    origins,
    url: (path, origin = TUNNEL_ORIGIN) => new URL(path, origin).href,
    rawConnect: () => clientSession.open(),
    async close() {
      await dispatcher.destroy();
      sessions.close();
    },
  };
}

export async function directRig(server: Server, opts: RigOptions = {}): Promise<Rig> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  const client = new Connections();
  const accepted = new Connections();
  server.on("connection", (socket: net.Socket) => accepted.track(socket));
  const tcp = buildConnector({});
  const idle = opts.idleTimeoutMs ?? 4_000;
  const dispatcher = new Agent({
    connections: opts.maxStreams ?? 16,
    keepAliveTimeout: idle,
    keepAliveMaxTimeout: idle,
    connect: (o, callback) =>
      tcp(o, (err, socket) => {
        if (socket) client.track(socket);
        if (err) callback(err, null);
        else callback(null, socket as net.Socket);
      }),
  });
  return {
    kind: "direct",
    server,
    dispatcher,
    client,
    accepted,
    origins: [base],
    url: (path) => new URL(path, base).href,
    rawConnect: async () => {
      const socket = net.connect(port, "127.0.0.1");
      await once(socket, "connect");
      return socket;
    },
    async close() {
      await dispatcher.destroy();
      server.closeAllConnections();
      server.close();
    },
  };
}

export const rigs = [
  ["tunnel", tunnelRig],
  ["direct", directRig],
] as const;

export { sessionPair, socketPair };

/**
 * `total` deterministic pseudo-random bytes (an AES-CTR keystream seeded by `seed`) in pieces of
 * varying size, with their SHA-256 computed as they are produced (no 64 MiB buffer held).
 */
export function generated(
  total: number,
  seed = 1,
): { chunks: AsyncGenerator<Buffer>; digest: Promise<string> } {
  const h = createHash("sha256");
  let resolveDigest!: (hex: string) => void;
  const digest = new Promise<string>((r) => {
    resolveDigest = r;
  });
  async function* chunks(): AsyncGenerator<Buffer> {
    const key = Buffer.alloc(16, seed);
    const cipher = createCipheriv("aes-128-ctr", key, Buffer.alloc(16));
    const zeros = Buffer.alloc(256 * 1024);
    let x = seed;
    let left = total;
    while (left > 0) {
      x = (x * 1103515245 + 12345) >>> 0;
      const n = Math.min(left, 1 + (x % zeros.length));
      const buf = cipher.update(zeros.subarray(0, n));
      h.update(buf);
      left -= n;
      yield buf;
    }
    resolveDigest(h.digest("hex"));
  }
  return { chunks: chunks(), digest };
}

/** An emitter's next `event`, ignoring 'error' (unlike events.once, which rejects on it). */
export function next(emitter: NodeJS.EventEmitter, event: string): Promise<void> {
  return new Promise((resolve) => emitter.once(event, () => resolve()));
}

/** A stream's 'close', or now if it already closed; errors on the way are fine. */
export function closed(stream: Duplex): Promise<void> {
  return stream.closed ? Promise.resolve() : next(stream, "close");
}

export function deferred<T = void>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
