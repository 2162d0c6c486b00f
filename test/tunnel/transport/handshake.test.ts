// The handshake's request view and the RFC 6455 / RFC 8441 checks, rule by rule. The acceptor's
// tests (protocol.test.ts) drive them through real upgrades; these pin each rule's edge and what
// the refusal says, on requests a real HTTP/1.1 and HTTP/2 server parsed.
import { once } from "node:events";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, test } from "vitest";
import {
  type HandshakeRequest,
  pathnameOf,
  requestFromH1,
  requestFromH2,
} from "../../../lib/tunnel/transport/handshake-request.ts";
import {
  parseSubprotocols,
  validateH1,
  validateH2,
} from "../../../lib/tunnel/transport/handshake-validate.ts";
import { testPki } from "../../support/tls-certs.ts";

const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** The HandshakeRequest a real HTTP/1.1 server builds for a request sent with `headers`. */
async function viaH1(path: string, headers: Record<string, string>): Promise<HandshakeRequest> {
  const server = http.createServer();
  closers.push(() => server.close());
  const seen = new Promise<HandshakeRequest>((resolve) =>
    server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      resolve(requestFromH1(req));
      res.end();
    }),
  );
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const req = http.request({ host: "127.0.0.1", port, path, headers, agent: false });
  req.on("response", (res) => res.resume());
  req.end();
  return seen;
}

interface H2Options {
  /** Serve over TLS (with the test CA's certificate). */
  tls?: boolean;
  /** Build the request from these headers instead of those received (what a client could send). */
  edit?: (received: http2.IncomingHttpHeaders) => http2.IncomingHttpHeaders;
  /** Build it only once the stream has closed, as a late reader would. */
  afterClose?: boolean;
}

/** The HandshakeRequest a real HTTP/2 server builds for a request sent with `headers`. */
async function viaH2(headers: http2.OutgoingHttpHeaders, o: H2Options = {}): Promise<HandshakeRequest> {
  const pki = o.tls ? await testPki() : undefined;
  const server = pki ? http2.createSecureServer({ cert: pki.cert, key: pki.key }) : http2.createServer();
  closers.push(() => server.close());
  const seen = new Promise<HandshakeRequest>((resolve) =>
    server.on("stream", (stream, h) => {
      const received = o.edit ? o.edit(h) : h;
      if (o.afterClose) {
        stream.on("close", () => resolve(requestFromH2(stream, received)));
        stream.close();
        return;
      }
      resolve(requestFromH2(stream, received));
      stream.respond({ ":status": 200 });
      stream.end();
    }),
  );
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const client = http2.connect(
    `${pki ? "https" : "http"}://127.0.0.1:${port}`,
    pki ? { ca: pki.caCert } : {},
  );
  closers.push(() => client.close());
  client.on("error", () => {});
  const req = client.request(headers);
  req.on("error", () => {});
  req.resume();
  return seen;
}

const KEY = "dGhlIHNhbXBsZSBub25jZQ==";
const SUB = "ws-tunnel";
const good = {
  upgrade: "websocket",
  "sec-websocket-key": KEY,
  "sec-websocket-version": "13",
  "sec-websocket-protocol": SUB,
};
const request = (headers: http.IncomingHttpHeaders, method = "GET"): HandshakeRequest => ({
  httpVersion: "h1",
  method,
  path: "/",
  pathname: "/",
  query: new URLSearchParams(),
  headers,
  remoteAddress: undefined,
  remotePort: undefined,
  secure: false,
});

describe("the request a handshake sees", () => {
  test("HTTP/1.1: method, path split into pathname and query, headers and the peer's address", async () => {
    const r = await viaH1("/agentk/connect?a=1&b=two%20words", { "X-Thing": "v" });
    expect(r.httpVersion).toBe("h1");
    expect(r.method).toBe("GET");
    expect(r.path).toBe("/agentk/connect?a=1&b=two%20words");
    expect(r.pathname).toBe("/agentk/connect");
    expect([...r.query]).toEqual([
      ["a", "1"],
      ["b", "two words"],
    ]);
    expect(r.headers["x-thing"]).toBe("v");
    expect(r.remoteAddress).toBe("127.0.0.1");
    expect(r.remotePort).toBeGreaterThan(0);
    expect(r.secure).toBe(false);
  });

  test("HTTP/1.1 without a query: pathname is the path, the query is empty", async () => {
    const r = await viaH1("/plain", {});
    expect(r.pathname).toBe("/plain");
    expect([...r.query]).toEqual([]);
  });

  test("HTTP/2: pseudo-headers become method and path; :authority stands in for a missing host", async () => {
    const r = await viaH2({ ":method": "POST", ":path": "/t?x=1", "x-thing": "v" });
    expect(r.httpVersion).toBe("h2");
    expect(r.method).toBe("POST");
    expect(r.path).toBe("/t?x=1");
    expect(r.pathname).toBe("/t");
    expect(r.query.get("x")).toBe("1");
    expect(r.headers).toMatchObject({ "x-thing": "v", host: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });
    expect(Object.keys(r.headers).filter((n) => n.startsWith(":"))).toEqual([]);
    expect(r.remoteAddress).toBe("127.0.0.1");
    expect(r.remotePort).toBeGreaterThan(0);
    expect(r.secure).toBe(false);
  });

  test("HTTP/2: a host header sent alongside :authority is kept", async () => {
    // node's client folds host into :authority, so the request is edited as another client may send it.
    const r = await viaH2({ ":path": "/" }, { edit: (h) => ({ ...h, host: "from-header" }) });
    expect(r.headers.host).toBe("from-header");
    const without = await viaH2({ ":path": "/" }, { edit: ({ ":authority": _, ...h }) => h });
    expect(without.headers.host).toBeUndefined();
  });

  test("HTTP/2: a plain CONNECT has no path; the view has an empty one", async () => {
    const r = await viaH2({ ":method": "CONNECT", ":authority": "example.test:443" });
    expect([r.method, r.path, r.pathname, r.headers.host]).toEqual(["CONNECT", "", "", "example.test:443"]);
  });

  test("HTTP/2 over TLS is secure; a stream whose session is gone gives no peer and is not", async () => {
    const tls = await viaH2({ ":path": "/" }, { tls: true });
    expect(tls.secure).toBe(true);
    expect(tls.remoteAddress).toBe("127.0.0.1");
    const gone = await viaH2({ ":path": "/x" }, { tls: true, afterClose: true });
    expect([gone.path, gone.remoteAddress, gone.remotePort, gone.secure]).toEqual([
      "/x",
      undefined,
      undefined,
      false,
    ]);
  });

  test("pathnameOf cuts at the first '?' only", () => {
    expect(pathnameOf("/a/b?c=d?e")).toBe("/a/b");
    expect(pathnameOf("/a/b")).toBe("/a/b");
    expect(pathnameOf("?x")).toBe("");
  });
});

describe("HTTP/1.1 Upgrade checks (RFC 6455 4.2.1)", () => {
  test("a complete request passes", () => {
    expect(validateH1(request(good), SUB)).toBeUndefined();
    expect(validateH1(request({ ...good, upgrade: "WebSocket" }), SUB)).toBeUndefined();
  });

  test("a method other than GET is 405", () => {
    expect(validateH1(request(good, "POST"), SUB)).toEqual({
      status: 405,
      message: "WebSocket handshake must use GET, not POST",
    });
  });

  test("a missing or other Upgrade is 426, saying what came and what is expected", () => {
    const headers = { Upgrade: "websocket", Connection: "Upgrade" };
    expect(validateH1(request({ ...good, upgrade: undefined }), SUB)).toEqual({
      status: 426,
      message: 'expected "Upgrade: websocket", got no Upgrade header',
      headers,
    });
    expect(validateH1(request({ ...good, upgrade: "h2c" }), SUB)).toEqual({
      status: 426,
      message: 'expected "Upgrade: websocket", got "Upgrade: h2c"',
      headers,
    });
  });

  test("the key must be 16 bytes of base64: 22 characters and '=='", () => {
    const refused = { status: 400, message: "missing or malformed Sec-WebSocket-Key header" };
    for (const key of [
      undefined,
      "",
      "dGhlIHNhbXBsZSBub25jZQ", // no padding
      "dGhlIHNhbXBsZSBub25jZQ=", // one '='
      "xdGhlIHNhbXBsZSBub25jZQ==", // 17 bytes
      "GhlIHNhbXBsZSBub25jZQ==", // 15 bytes
      "dGhlIHNhbXBsZSBub25jZ-==", // not base64
      ` ${KEY}`,
      `${KEY} `,
    ]) {
      expect(validateH1(request({ ...good, "sec-websocket-key": key }), SUB), String(key)).toEqual(refused);
    }
    // A list (a key sent twice) is no key, even when it holds one valid value.
    const listed = { ...good, "sec-websocket-key": [KEY] as unknown as string };
    expect(validateH1(request(listed), SUB)).toEqual(refused);
    for (const key of ["+/+/+/+/+/+/+/+/+/+/+/==", "0123456789abcdefABCDEF=="]) {
      expect(validateH1(request({ ...good, "sec-websocket-key": key }), SUB)).toBeUndefined();
    }
  });

  test("a version other than 13 is 426 and names the one expected", () => {
    const expected = (got: string) => ({
      status: 426,
      message: `unsupported WebSocket version ${got}; expected 13`,
      headers: { "Sec-WebSocket-Version": "13" },
    });
    expect(validateH1(request({ ...good, "sec-websocket-version": "8" }), SUB)).toEqual(expected('"8"'));
    expect(validateH1(request({ ...good, "sec-websocket-version": undefined }), SUB)).toEqual(
      expected("null"),
    );
  });

  test("the endpoint's subprotocol must be among those offered, and the refusal lists them", () => {
    expect(validateH1(request({ ...good, "sec-websocket-protocol": `chat, ${SUB}` }), SUB)).toBeUndefined();
    expect(validateH1(request({ ...good, "sec-websocket-protocol": "chat,  other" }), SUB)).toEqual({
      status: 400,
      message: `unsupported WebSocket subprotocol (offered: "chat", "other"); this endpoint requires "${SUB}"`,
    });
    expect(validateH1(request({ ...good, "sec-websocket-protocol": undefined }), SUB)).toEqual({
      status: 400,
      message: `unsupported WebSocket subprotocol (offered: none); this endpoint requires "${SUB}"`,
    });
    // A prefix or a longer name is not the subprotocol.
    expect(validateH1(request({ ...good, "sec-websocket-protocol": `${SUB}x` }), SUB)?.status).toBe(400);
  });
});

describe("HTTP/2 extended CONNECT checks (RFC 8441 5)", () => {
  const h2 = { "sec-websocket-version": "13", "sec-websocket-protocol": SUB };

  test(":protocol must be websocket; version and subprotocol are checked as for HTTP/1.1", () => {
    expect(validateH2(request(h2, "CONNECT"), "websocket", SUB)).toBeUndefined();
    expect(validateH2(request(h2, "CONNECT"), "connect-udp", SUB)).toEqual({
      status: 400,
      message: 'unsupported :protocol "connect-udp"; expected "websocket"',
    });
    expect(validateH2(request(h2, "CONNECT"), undefined, SUB)?.message).toBe(
      'unsupported :protocol "undefined"; expected "websocket"',
    );
    expect(
      validateH2(request({ ...h2, "sec-websocket-version": "12" }, "CONNECT"), "websocket", SUB)?.status,
    ).toBe(426);
    expect(
      validateH2(request({ ...h2, "sec-websocket-protocol": "x" }, "CONNECT"), "websocket", SUB)?.status,
    ).toBe(400);
  });
});

describe("parseSubprotocols", () => {
  test("splits on commas, trims, and drops empty entries", () => {
    expect(parseSubprotocols(undefined)).toEqual([]);
    expect(parseSubprotocols("")).toEqual([]);
    expect(parseSubprotocols(" a ,b,, ,c ")).toEqual(["a", "b", "c"]);
  });
});
