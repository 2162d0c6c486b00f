import { once } from "node:events";
import net from "node:net";
import { Duplex } from "node:stream";
import { Session, type SessionOptions } from "../../lib/tunnel/yamux/index.ts";

/** A connected pair of loopback TCP sockets; Nagle off unless `noDelay` is false. */
export async function socketPair({ noDelay = true } = {}): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  const accepted = once(server, "connection") as Promise<[net.Socket]>;
  const client = net.connect(port, "127.0.0.1");
  const [[serverSide]] = await Promise.all([accepted, once(client, "connect")]);
  server.close();
  client.setNoDelay(noDelay);
  serverSide.setNoDelay(noDelay);
  return [client, serverSide];
}

export interface SessionPair {
  client: Session;
  server: Session;
  sockets: [net.Socket, net.Socket];
  close(): void;
}

/** Two yamux sessions over loopback TCP. Keepalive is off unless asked for. */
export async function sessionPair(
  opts: Partial<SessionOptions> = {},
  serverOpts: Partial<SessionOptions> = {},
): Promise<SessionPair> {
  const sockets = await socketPair();
  const client = new Session(sockets[0], { keepAliveIntervalMs: 0, ...opts, client: true });
  const server = new Session(sockets[1], { keepAliveIntervalMs: 0, ...opts, ...serverOpts, client: false });
  return {
    client,
    server,
    sockets,
    close() {
      client.destroy();
      server.destroy();
      for (const s of sockets) s.destroy();
    },
  };
}

/**
 * Two connected in-process byte streams whose bytes arrive `delayMs` after they are written, in
 * order: a long path, for logic that depends on the round-trip time. In-flight bytes are not
 * bounded here (the protocol on top bounds them).
 */
export function delayedStreamPair(delayMs: number): [Duplex, Duplex] {
  const ends: Duplex[] = [];
  const make = (peer: () => Duplex) =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        setTimeout(() => peer().push(chunk), delayMs);
        callback();
      },
      final(callback) {
        setTimeout(() => peer().push(null), delayMs);
        callback();
      },
    });
  ends.push(
    make(() => ends[1]!),
    make(() => ends[0]!),
  );
  return [ends[0]!, ends[1]!];
}
