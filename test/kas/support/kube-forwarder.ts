import { createServer, type IncomingMessage, type Server } from "node:http";
import { request } from "node:https";
import type { Duplex } from "node:stream";
import { connect } from "node:tls";
import type { KubeApiServer } from "../../support/kube-apiserver.ts";

/**
 * What agentk's Kubernetes module does, reduced to a test stand-in: a node:http server (fed
 * tunnel streams by the stand-in agent) that sends every request to the API server with the
 * agent's own credentials, streaming, Upgrade included.
 */
export function kubeForwarder(kube: KubeApiServer): Server {
  const target = new URL(kube.url);
  const headersFor = (req: IncomingMessage) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && name !== "authorization" && name !== "host") headers[name] = value;
    }
    headers.authorization = `Bearer ${kube.token}`;
    headers.host = target.host;
    return headers;
  };
  const server = createServer((req, res) => {
    const upstream = request(
      kube.url + (req.url ?? "/"),
      { method: req.method, headers: headersFor(req), ca: kube.caCert },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    res.once("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const tls = connect({
      host: target.hostname,
      port: Number(target.port),
      ca: kube.caCert,
      servername: "localhost",
    });
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (const [name, value] of Object.entries(headersFor(req))) lines.push(`${name}: ${value}`);
    tls.write(`${lines.join("\r\n")}\r\n\r\n`);
    if (head.length > 0) tls.write(head);
    tls.pipe(socket).pipe(tls);
    tls.on("error", () => socket.destroy());
    socket.on("error", () => tls.destroy());
  });
  return server;
}
