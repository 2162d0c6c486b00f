import { once } from "node:events";
import * as http from "node:http";
import * as http2 from "node:http2";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { createProtocolSplitServer, HTTP2_PREFACE, prefaceVerdict } from "../../../tool/http/serve/index.ts";
import { rawExchange } from "../../support/raw-http.ts";
import { until } from "../../support/until.ts";

describe("prefaceVerdict (the cleartext sniff)", () => {
  it("http2 exactly for the preface (and what follows it), undecided for its prefixes, other for the rest", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const head = Buffer.from(bytes);
        const verdict = prefaceVerdict(head);
        const n = Math.min(head.length, HTTP2_PREFACE.length);
        const agrees = head.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n));
        expect(verdict).toBe(!agrees ? "other" : n === HTTP2_PREFACE.length ? "http2" : "undecided");
      }),
    );
    fc.assert(
      fc.property(fc.nat({ max: HTTP2_PREFACE.length }), fc.uint8Array({ maxLength: 32 }), (cut, rest) => {
        const head = Buffer.concat([
          HTTP2_PREFACE.subarray(0, cut),
          cut === HTTP2_PREFACE.length ? rest : new Uint8Array(),
        ]);
        expect(prefaceVerdict(head)).toBe(cut === HTTP2_PREFACE.length ? "http2" : "undecided");
      }),
    );
    expect(prefaceVerdict(Buffer.from("GET / HTTP/1.1\r\n"))).toBe("other");
    expect(prefaceVerdict(Buffer.from("PRI * HTTP/1.1\r\n"))).toBe("other");
  });
});

describe("createProtocolSplitServer (cleartext)", () => {
  const servers: Array<{ close(): unknown }> = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  /** A split server whose HTTP/1 side is a node:http server and whose HTTP/2 side a node:http2 one. */
  async function start(firstBytesTimeoutMs = 500) {
    const h1 = http.createServer((req, res) => res.end(`h1 ${req.url}`));
    const h2 = http2.createServer((req, res) => res.end(`h2 ${req.url}`));
    const http2Sockets: Duplex[] = [];
    const front = createProtocolSplitServer({
      http1: (socket) => h1.emit("connection", socket),
      http2: (socket) => {
        http2Sockets.push(socket);
        h2.emit("connection", socket);
      },
      firstBytesTimeoutMs,
    });
    await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
    const { port } = front.address() as { port: number };
    h1.emit("listening"); // as listenHttp does: node:http tracks its connections from then on
    const sessions: http2.ClientHttp2Session[] = [];
    servers.push({
      close: async () => {
        for (const s of sessions) s.destroy();
        h1.closeAllConnections();
        for (const s of http2Sockets) s.destroy();
        front.cutUndecided();
        await new Promise((resolve) => front.close(resolve));
      },
    });
    return { port, sessions, http2Sockets, front };
  }

  it("HTTP/1.1 requests reach the HTTP server, even sent one byte at a time", async () => {
    const { port } = await start();
    const res = await fetch(`http://127.0.0.1:${port}/one`);
    expect(await res.text()).toBe("h1 /one");
    const socket = connect(port, "127.0.0.1");
    await once(socket, "connect");
    const request = "GET /slow HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    const answer = readAll(socket);
    for (const ch of request) {
      socket.write(ch);
      await new Promise((r) => setImmediate(r));
    }
    expect(await answer).toMatch(/h1 \/slow$/);
  });

  it("prior-knowledge HTTP/2 reaches the HTTP/2 server; both kinds on the same port at once", async () => {
    const { port, sessions, http2Sockets } = await start();
    const session = http2.connect(`http://127.0.0.1:${port}`);
    sessions.push(session);
    const stream = session.request({ ":path": "/two" });
    stream.end();
    const body = await readAll(stream);
    expect(body).toBe("h2 /two");
    expect(http2Sockets).toHaveLength(1);
    const raw = await rawExchange(port, "GET /three HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    expect(raw.body).toBe("h1 /three");
  });

  it("closing stops accepting but keeps a connection whose first bytes are on their way; cutUndecided cuts the silent ones", async () => {
    const { port, front } = await start(60_000);
    const connections = () => new Promise<number>((resolve) => front.getConnections((_err, n) => resolve(n)));
    const late = connect(port, "127.0.0.1");
    const silent = connect(port, "127.0.0.1");
    await Promise.all([once(late, "connect"), once(silent, "connect")]);
    await until(async () => (await connections()) === 2, 5_000, "the connections to be accepted");
    const closed = new Promise((resolve) => front.close(resolve));
    // Its request comes after the close (as through a TCP load balancer that connected first): served.
    const answer = readAll(late);
    late.end("GET /late HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    expect(await answer).toMatch(/^HTTP\/1\.1 200[\s\S]*h1 \/late$/);
    expect(silent.destroyed).toBe(false);
    front.cutUndecided();
    await once(silent, "close");
    await closed;
  });

  it("a client that sends nothing is cut after the first-bytes timeout", async () => {
    const { port } = await start();
    const socket = connect(port, "127.0.0.1");
    await once(socket, "close");
    expect(socket.bytesWritten).toBe(0);
  });
});

function readAll(stream: NodeJS.ReadableStream | Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    stream.on("data", (c: Buffer) => {
      text += c.toString();
    });
    stream.on("end", () => resolve(text));
    stream.on("error", reject);
  });
}
