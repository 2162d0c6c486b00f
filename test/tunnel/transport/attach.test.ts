import { EventEmitter, once } from "node:events";
import * as http from "node:http";
import * as http2 from "node:http2";
import { type AddressInfo, connect, type Server, type Socket } from "node:net";
import { setImmediate as tick } from "node:timers/promises";
import { describe, expect, onTestFinished, test } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import {
  classify,
  createSniffingServer,
  dial,
  HTTP2_PREFACE,
  type TransportConnection,
  type TransportError,
  TunnelAcceptor,
} from "../../../lib/tunnel/transport/index.ts";
import { testPki } from "../../support/tls-certs.ts";
import { within } from "../../support/until.ts";
import { Accepted, dialed, readBytes } from "./helpers.ts";

async function listenOn(server: Server): Promise<number> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as AddressInfo).port;
}

function tracked(server: Server): void {
  const sockets = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  onTestFinished(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
}

describe("attach to an existing HTTP/2 TLS server that serves other requests (allowHTTP1)", () => {
  test("tunnels over h1 and h2 at the path, the app keeps its routes, other CONNECTs get 404", async () => {
    const pki = await testPki();
    // Created without enableConnectProtocol: attach() turns it on.
    const server = http2.createSecureServer(
      { cert: pki.cert, key: pki.key, allowHTTP1: true },
      (req, res) => {
        res.writeHead(req.url === "/healthz" ? 200 : 404).end(`app:${req.url}`);
      },
    );
    tracked(server);
    const accepted = new Accepted<string>();
    const acceptor = new TunnelAcceptor<string>({
      path: "/tunnel",
      authenticate: (request) => request.httpVersion,
      onConnection: accepted.push,
    });
    acceptor.attach(server);
    const port = await listenOn(server);
    const url = `wss://127.0.0.1:${port}/tunnel`;

    for (const http2Dial of [false, true]) {
      const client = await dialed(url, { http2: http2Dial, ca: pki.caCert, proxy: false });
      const peer = await accepted.next();
      expect(peer.identity).toBe(http2Dial ? "h2" : "h1");
      peer.stream.write(Buffer.from("hi"));
      expect((await readBytes(client.stream, 2)).toString()).toBe("hi");
    }

    const session = http2.connect(`https://127.0.0.1:${port}`, { ca: pki.caCert });
    session.on("error", () => {});
    onTestFinished(() => session.destroy());
    const request = async (headers: http2.OutgoingHttpHeaders) => {
      const req = session.request(headers, { endStream: headers[":method"] !== "CONNECT" });
      const [response] = await within(once(req, "response"), 5000, "response");
      const body = (await req.toArray()).join("");
      return { status: response[":status"], body };
    };
    expect(await request({ ":path": "/healthz" })).toEqual({ status: 200, body: "app:/healthz" });
    const other = await request({
      ":method": "CONNECT",
      ":protocol": "websocket",
      ":scheme": "https",
      ":path": "/elsewhere",
      ":authority": `127.0.0.1:${port}`,
    });
    expect(other.status).toBe(404);
  });
});

describe("attach to an http.Server shared with another WebSocket endpoint", () => {
  test("each path goes to its owner; detach stops serving the tunnel", async () => {
    const server = http.createServer((_req, res) => res.writeHead(200).end("app"));
    tracked(server);
    const echo = new WebSocketServer({ noServer: true });
    server.on("upgrade", (req, socket, head) => {
      if (req.url !== "/echo") return;
      echo.handleUpgrade(req, socket, head, (ws) => ws.on("message", (m) => ws.send(m)));
    });
    const accepted = new Accepted<undefined>();
    const acceptor = new TunnelAcceptor({ path: "/tunnel", onConnection: accepted.push });
    const detach = acceptor.attach(server);
    const port = await listenOn(server);

    const client = await dialed(`ws://127.0.0.1:${port}/tunnel`, { proxy: false });
    const peer: TransportConnection = await accepted.next();
    client.stream.write(Buffer.from("x"));
    expect((await readBytes(peer.stream, 1)).toString()).toBe("x");

    const other = new WebSocket(`ws://127.0.0.1:${port}/echo`);
    onTestFinished(() => other.terminate());
    await within(once(other, "open"), 5000, "echo open");
    other.send("ping");
    const [reply] = await within(once(other, "message"), 5000, "echo reply");
    expect(String(reply)).toBe("ping");

    detach();
    expect(server.listenerCount("upgrade")).toBe(1);
    // Only the echo endpoint's listener is left, and it ignores the path: the handshake goes unanswered.
    const err = (await dial(`ws://127.0.0.1:${port}/tunnel`, { proxy: false, handshakeTimeoutMs: 300 }).catch(
      (e: unknown) => e,
    )) as TransportError;
    expect(err.code).toBe("HANDSHAKE_TIMEOUT");
    await expect(accepted.next(50)).rejects.toThrow(/timed out/);
  });
});

describe("HTTP/2 preface sniffing", () => {
  test("classify tells the preface from anything else as early as possible", () => {
    expect(classify(Buffer.from("G"))).toBe(false);
    expect(classify(Buffer.from("PRI * HTTP/1.1"))).toBe(false);
    expect(classify(HTTP2_PREFACE.subarray(0, 1))).toBeUndefined();
    expect(classify(HTTP2_PREFACE.subarray(0, 23))).toBeUndefined();
    expect(classify(HTTP2_PREFACE)).toBe(true);
    expect(classify(Buffer.concat([HTTP2_PREFACE, Buffer.from([0, 0, 0])]))).toBe(true);
  });

  test("a preface split across packets is routed to HTTP/2 with every byte put back", async () => {
    const h1 = new EventEmitter();
    const h2 = new EventEmitter();
    const sniffer = createSniffingServer({
      h1: h1 as http.Server,
      h2: h2 as http2.Http2Server,
      timeoutMs: 5000,
    });
    tracked(sniffer);
    const port = await listenOn(sniffer);
    const routed = once(h2, "connection") as Promise<[Socket]>;
    const wrong: Socket[] = [];
    h1.on("connection", (socket: Socket) => wrong.push(socket));
    const client = connect({ port, host: "127.0.0.1", noDelay: true });
    onTestFinished(() => {
      client.destroy();
    });
    await once(client, "connect");
    const payload = Buffer.concat([HTTP2_PREFACE, Buffer.from("after")]);
    for (const piece of [payload.subarray(0, 3), payload.subarray(3, 17), payload.subarray(17)]) {
      client.write(piece);
      await tick();
    }
    const [socket] = await within(routed, 5000, "routing");
    expect((await readBytes(socket, payload.length)).equals(payload)).toBe(true);
    expect(wrong).toHaveLength(0);
  });
});
