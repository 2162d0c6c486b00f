import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";

export interface ConnectProxy {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** `host:port` of every CONNECT received, in order. */
  readonly connects: string[];
  close(): Promise<void>;
}

/**
 * A minimal HTTP CONNECT proxy for tests: tunnels to loopback targets only and records each
 * CONNECT target. `refuse` makes it answer every CONNECT with that status instead.
 */
export async function startConnectProxy(options: { refuse?: number } = {}): Promise<ConnectProxy> {
  const connects: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(405).end("CONNECT only\n");
  });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  server.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => {
    const target = req.url ?? "";
    connects.push(target);
    client.on("error", () => client.destroy());
    const match = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(target);
    const host = match?.[1]?.replace(/^\[|\]$/g, "");
    if (options.refuse || !match || (host !== "127.0.0.1" && host !== "::1" && host !== "localhost")) {
      const status = options.refuse ?? 403;
      client.end(`HTTP/1.1 ${status} Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
      return;
    }
    const upstream = connect({ host, port: Number(match[2]) });
    sockets.add(upstream);
    upstream.once("close", () => sockets.delete(upstream));
    upstream.on("error", () => client.destroy());
    upstream.once("connect", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    connects,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
