// The floor under kas's Kubernetes API proxy: the same three HTTP hops (client -> TLS front ->
// second hop -> API server) with nothing else. The front is a node:https server sending each
// request on with an undici pool over loopback TCP, as kas does over the tunnel; the second hop
// is a node:http server sending it to the API server with node:https and a keep-alive agent, as
// agentk does. No tunnel, no authorization, no header rules, no metrics, no error handling
// beyond failing the request: what Node's HTTP stack alone costs for two proxies in a chain.
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
  const target = new URL(o.upstream.url);
  const agent = new https.Agent({ keepAlive: true, ca: o.upstream.caCert });
  const second = http.createServer((req, res) => {
    const up = https.request(
      {
        host: target.hostname,
        port: target.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, host: target.host, authorization: `Bearer ${o.upstream.token}` },
        agent,
      },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
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
      await Promise.all([close(front), close(second), pool.close()]);
      agent.destroy();
    },
  };
}

function listen(server: http.Server): Promise<void> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
}

function close(server: http.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
