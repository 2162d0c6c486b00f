// serveHttp's `until`: once it aborts (the tunnel is draining), responses on the connection say
// `Connection: close`, so a keep-alive client takes its next request elsewhere; an idle
// connection is not closed under the client.
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { createServer as createTcpServer, type Server as TcpServer } from "node:net";
import { Client } from "undici";
import { afterEach, describe, expect, test } from "vitest";
import { serveHttp } from "../../../lib/tunnel/index.ts";

describe("serveHttp: connections that must leave", () => {
  let tcp: TcpServer | undefined;
  let client: Client | undefined;
  afterEach(async () => {
    await client?.close();
    tcp?.close();
  });

  async function start(handler: Parameters<typeof serveHttp>[0], until: AbortSignal) {
    const served = serveHttp(handler);
    tcp = createTcpServer((socket) => served.handle(socket, undefined, until)).listen(0, "127.0.0.1");
    await once(tcp, "listening");
    client = new Client(`http://127.0.0.1:${(tcp.address() as AddressInfo).port}`);
    return served;
  }

  test("after `until` aborts, the next response on a kept-alive connection says Connection: close", async () => {
    const drain = new AbortController();
    let connections = 0;
    await start((_req, res) => res.end("ok"), drain.signal);
    tcp!.on("connection", () => connections++);
    const first = await client!.request({ path: "/", method: "GET" });
    expect(first.headers.connection).toBe("keep-alive");
    await first.body.text();
    drain.abort();
    const second = await client!.request({ path: "/", method: "GET" });
    expect(second.headers.connection).toBe("close");
    await second.body.text();
    const third = await client!.request({ path: "/", method: "GET" }); // on a new connection
    await third.body.text();
    expect(connections).toBe(2);
  });

  test("a response under way whose headers are not out yet says Connection: close too", async () => {
    const drain = new AbortController();
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let arrived!: () => void;
    const atServer = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    await start((_req, res) => {
      arrived();
      void held.then(() => res.end("late"));
    }, drain.signal);
    const pending = client!.request({ path: "/", method: "GET" });
    await atServer;
    drain.abort();
    release();
    const res = await pending;
    expect(res.headers.connection).toBe("close");
    expect(await res.body.text()).toBe("late");
  });
});
