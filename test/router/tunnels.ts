import { serveTunnels, type TunnelServer, TunnelSession } from "../../lib/tunnel/session/index.ts";
import { dial } from "../../lib/tunnel/transport/index.ts";

/** Real tunnels over loopback WebSockets: `next()` dials one and returns the server's end. */
export async function tunnelFactory(): Promise<{
  next(): Promise<{ server: TunnelSession; client: TunnelSession }>;
  close(): Promise<void>;
}> {
  const arrivals: Array<(s: TunnelSession) => void> = [];
  const server: TunnelServer<undefined> = await serveTunnels({
    host: "127.0.0.1",
    tunnel: { keepAliveIntervalMs: 0 },
    onSession: (s) => arrivals.shift()?.(s),
  });
  const clients: TunnelSession[] = [];
  return {
    async next() {
      const accepted = new Promise<TunnelSession>((resolve) => arrivals.push(resolve));
      const client = new TunnelSession(await dial(server.url), "client", { keepAliveIntervalMs: 0 });
      client.on("stream", (s) => s.resume()); // accept what the server side opens
      clients.push(client);
      return { server: await accepted, client };
    },
    async close() {
      for (const c of clients) c.destroy();
      await server.close(100);
    },
  };
}
