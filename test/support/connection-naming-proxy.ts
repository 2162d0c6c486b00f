// An attacker's client stack in front of a real client (kubectl): an HTTPS proxy (the test CA's
// certificate: kubectl sends no token over plain HTTP) that relays every request, Upgrades
// included, to an HTTPS server and adds header names to its Connection
// header, asking every hop after it to drop them. What it adds is what a client may say; what the
// server does with it is under test.
import { once } from "node:events";
import type * as http from "node:http";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import * as tls from "node:tls";
import { testPki } from "./tls-certs.ts";

export interface ConnectionNamingProxy {
  /** `https://127.0.0.1:<port>` (the test CA's certificate): the server to give the client. */
  url: string;
  close(): Promise<void>;
}

export async function startConnectionNamingProxy(
  target: string,
  ca: string,
  /** Header names to list in each request's Connection header. */
  names: readonly string[],
): Promise<ConnectionNamingProxy> {
  const to = new URL(target);
  const port = Number(to.port);
  const named = names.join(", ");
  const agent = new https.Agent({ keepAlive: true, ca, servername: "localhost" });
  const pki = await testPki();
  const server = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const up = https.request({
      host: to.hostname,
      port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, connection: `keep-alive, ${named}` },
      agent,
    });
    up.on("response", (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on("error", () => res.destroy());
    res.once("close", () => up.destroy());
    req.pipe(up);
  });
  const upgraded = new Set<tls.TLSSocket>();
  server.on("upgrade", (req: http.IncomingMessage, socket, head: Buffer) => {
    const up = tls.connect({ host: to.hostname, port, ca, servername: "localhost" });
    upgraded.add(up);
    up.once("close", () => upgraded.delete(up));
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!;
      lines.push(
        `${name}: ${req.rawHeaders[i + 1]}${name.toLowerCase() === "connection" ? `, ${named}` : ""}`,
      );
    }
    up.write(`${lines.join("\r\n")}\r\n\r\n`);
    if (head.length > 0) up.write(head);
    up.on("error", () => socket.destroy());
    socket.on("error", () => up.destroy());
    up.once("close", () => socket.destroy());
    socket.once("close", () => up.destroy());
    up.pipe(socket);
    socket.pipe(up);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      for (const up of upgraded) up.destroy();
      agent.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
