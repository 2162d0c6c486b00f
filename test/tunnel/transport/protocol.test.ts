import { once } from "node:events";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import { describe, expect, test } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import {
  ConnectionClosedError,
  dial,
  type HandshakeError,
  TransportError,
} from "../../../lib/tunnel/transport/index.ts";
import { testPki } from "../../support/tls-certs.ts";
import { within } from "../../support/until.ts";
import { dialed, nextError, readBytes, startServer, VARIANTS } from "./helpers.ts";

function failure(promise: Promise<unknown>): Promise<HandshakeError> {
  return promise.then(
    () => {
      throw new Error("unexpectedly succeeded");
    },
    (e: unknown) => e as HandshakeError,
  );
}

describe.each(VARIANTS)("$name", (variant) => {
  test("a client asking for another subprotocol is refused with 400 naming the required one", async () => {
    const server = await startServer(variant);
    const err = await failure(dial(server.url, { ...server.dialOptions, subprotocol: "other.v1" }));
    expect(err.status).toBe(400);
    expect(err.body).toContain('offered: "other.v1"');
    expect(err.body).toContain('requires "gitlab-agent-tunnel.v1"');
  });

  test("a handshake to another path is refused with 404", async () => {
    const server = await startServer(variant);
    const err = await failure(dial(new URL("/elsewhere", server.url), server.dialOptions));
    expect(err.status).toBe(404);
    expect(err.body).toContain("no tunnel endpoint at /elsewhere");
  });

  test("a text message closes the connection with 1003 and errors both streams", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    const serverError = nextError(peer.stream);
    const clientError = nextError(client.stream);
    client.ws.send("not binary");
    const se = await serverError;
    expect(se).toBeInstanceOf(TransportError);
    expect(se.code).toBe("PROTOCOL");
    expect(se.message).toContain("text message");
    const ce = await clientError;
    expect(ce).toBeInstanceOf(ConnectionClosedError);
    expect(ce.closeCode).toBe(1003);
    expect(ce.message).toContain("binary messages only");
    expect(await within(client.closed, 5000, "client close")).toMatchObject({ code: 1003 });
    expect(await within(peer.closed, 5000, "server close")).toMatchObject({ code: 1003 });
  });

  test("a message over maxPayload closes the connection with 1009; one at the limit passes", async () => {
    const server = await startServer(variant, { maxPayload: 4096 });
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    client.stream.write(Buffer.alloc(4096, 1));
    expect((await readBytes(peer.stream, 4096)).length).toBe(4096);
    const serverError = nextError(peer.stream);
    const clientError = nextError(client.stream);
    client.stream.write(Buffer.alloc(4097, 2));
    const se = await serverError;
    expect(se.code).toBe("PROTOCOL");
    expect(se.message).toContain("larger than the limit");
    expect((await clientError).closeCode).toBe(1009);
  });
});

describe("non-WebSocket requests", () => {
  test("HTTP/1.1: plain GET on the path gets 426, other paths 404", async () => {
    const server = await startServer({ tls: false });
    const get = async (path: string) => {
      const res = await within(
        new Promise<http.IncomingMessage>((resolve, reject) =>
          http.get(new URL(path, server.url.replace(/^ws/, "http")), resolve).on("error", reject),
        ),
        5000,
        "response",
      );
      res.resume();
      return res;
    };
    const ours = await get("/");
    expect(ours.statusCode).toBe(426);
    expect(ours.headers.upgrade).toBe("websocket");
    expect((await get("/other")).statusCode).toBe(404);
  });

  test("HTTP/2: plain GET gets 426, CONNECT without :protocol 405", async () => {
    const server = await startServer({ tls: false });
    const session = http2.connect(server.url.replace(/^ws/, "http"));
    session.on("error", () => {});
    try {
      const status = async (headers: http2.OutgoingHttpHeaders) => {
        const req = session.request(headers, { endStream: headers[":method"] !== "CONNECT" });
        const [response] = await within(once(req, "response"), 5000, "h2 response");
        req.resume();
        return response[":status"];
      };
      expect(await status({ ":path": "/" })).toBe(426);
      expect(await status({ ":path": "/x" })).toBe(404);
      expect(await status({ ":method": "CONNECT", ":authority": "example:443" })).toBe(405);
    } finally {
      session.destroy();
    }
  });

  test.each([false, true])(
    "headers larger than maxHeaderSize (tls=%s): 431 over HTTP/1.1, a stream reset over HTTP/2",
    async (tls) => {
      const server = await startServer({ tls }, { maxHeaderSize: 4096 });
      const headers = { "X-Big": "a".repeat(8192) };
      const h1 = await failure(dial(server.url, { ...server.dialOptions, headers }));
      expect(h1.status).toBe(431);
      const h2 = await failure(dial(server.url, { ...server.dialOptions, http2: true, headers }));
      expect(h2.code).toBe("PROTOCOL");
      expect(h2.message).toContain("refused the WebSocket CONNECT stream");
      expect(h2.message).toContain("ENHANCE_YOUR_CALM");
    },
  );
});

describe("the dialer checks the server's answer", () => {
  test("a server that selects no subprotocol is refused (PROTOCOL)", async () => {
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, handleProtocols: () => false });
    await once(wss, "listening");
    try {
      const { port } = wss.address() as AddressInfo;
      const err = await failure(dial(`ws://127.0.0.1:${port}/`, { proxy: false }));
      expect(err).toBeInstanceOf(TransportError);
      expect(err.code).toBe("PROTOCOL");
      expect(err.message).toContain("Server sent no subprotocol");
    } finally {
      for (const client of wss.clients) client.terminate();
      wss.close();
    }
  });

  test("http2 against an HTTP/1.1-only TLS server fails clearly (no ALPN h2)", async () => {
    const pki = await testPki();
    const server = https.createServer({ cert: pki.cert, key: pki.key });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const { port } = server.address() as AddressInfo;
      const err = await failure(
        dial(`wss://127.0.0.1:${port}/`, { http2: true, ca: pki.caCert, proxy: false }),
      );
      expect(err.code).toBe("PROTOCOL");
      expect(err.message).toContain("did not negotiate HTTP/2");
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  test("http2 against an HTTP/2 server without RFC 8441 fails clearly", async () => {
    const server = http2.createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const sessions = new Set<http2.ServerHttp2Session>();
    server.on("session", (s) => sessions.add(s));
    try {
      const { port } = server.address() as AddressInfo;
      const err = await failure(dial(`ws://127.0.0.1:${port}/`, { http2: true, proxy: false }));
      expect(err.code).toBe("PROTOCOL");
      expect(err.message).toContain("SETTINGS_ENABLE_CONNECT_PROTOCOL");
    } finally {
      for (const s of sessions) s.destroy();
      server.close();
    }
  });

  test("a raw ws client without the subprotocol is refused with 400", async () => {
    const server = await startServer({ tls: false });
    const ws = new WebSocket(server.url);
    ws.on("error", () => {}); // terminate() below reports the aborted handshake
    const [, res] = await within(
      once(ws, "unexpected-response") as Promise<[unknown, http.IncomingMessage]>,
      5000,
      "response",
    );
    expect(res.statusCode).toBe(400);
    ws.terminate();
  });
});

test("a header value Node refuses is a TypeError, not a network error", async () => {
  await expect(
    dial("ws://127.0.0.1:9/", { proxy: false, headers: { "X-Bad": "a\r\nb" } }),
  ).rejects.toBeInstanceOf(TypeError);
});
