// The floor under kas's Kubernetes API proxy: the same three HTTP hops (client -> TLS front ->
// second hop -> API server) with nothing else. Each hop sends the request on with an undici pool,
// as kas (over the tunnel) and agentk (to the API server) do: the front, a node:https server, over
// loopback TCP; the second hop, a node:http server, over TLS to the API server. No tunnel, no
// authorization, no header rules, no metrics, no error handling beyond failing the request: what
// Node's HTTP stack alone costs for two proxies in a chain.
import * as http from "node:http";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";

export interface BareProxies {
  /** https:// origin of the front. */
  url: string;
  close(): Promise<void>;
}

export async function startBareProxies(o: {
  /** The API server, and what the second hop authenticates to it with. */
  upstream: { url: string; caCert: string; token: string };
  /** The front's certificate. */
  tls: { cert: string; key: string };
}): Promise<BareProxies> {
  const upstream = new Pool(o.upstream.url, { connect: { ca: o.upstream.caCert } });
  const host = new URL(o.upstream.url).host;
  const second = http.createServer((req, res) => {
    const { connection: _hop, ...rest } = req.headers;
    const headers = { ...rest, host, authorization: `Bearer ${o.upstream.token}` };
    upstream
      .request({ path: req.url ?? "/", method: "GET", headers: headers as Record<string, string | string[]> })
      .then((up) => {
        res.writeHead(up.statusCode, up.headers as http.OutgoingHttpHeaders);
        up.body.pipe(res);
      })
      .catch(() => res.destroy());
  });
  await listen(second);
  const pool = new Pool(`http://127.0.0.1:${(second.address() as AddressInfo).port}`);
  const front = https.createServer(o.tls, (req, res) => {
    const { authorization: _credentials, host: _host, ...headers } = req.headers;
    pool
      .request({ path: req.url ?? "/", method: "GET", headers: headers as Record<string, string> })
      .then((up) => {
        res.writeHead(up.statusCode, up.headers as http.OutgoingHttpHeaders);
        up.body.pipe(res);
      })
      .catch(() => res.destroy());
  });
  await listen(front);
  return {
    url: `https://localhost:${(front.address() as AddressInfo).port}`,
    async close() {
      front.closeAllConnections();
      second.closeAllConnections();
      await Promise.all([close(front), close(second), pool.close(), upstream.close()]);
    },
  };
}

function listen(server: http.Server): Promise<void> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
}

function close(server: http.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
