import { once } from "node:events";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { afterEach, beforeEach, describe, expect, onTestFinished, test } from "vitest";
import { dial, type HandshakeError } from "../../../lib/tunnel/transport/index.ts";
import { type ConnectProxy, startConnectProxy } from "../../support/connect-proxy.ts";
import { within } from "../../support/until.ts";
import { dialed, readBytes, startServer, VARIANTS } from "./helpers.ts";

const PROXY_VARS = [
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
  "ALL_PROXY",
  "all_proxy",
];
let saved: Record<string, string | undefined> = {};

beforeEach(() => {
  saved = Object.fromEntries(PROXY_VARS.map((name) => [name, process.env[name]]));
  for (const name of PROXY_VARS) delete process.env[name];
});

afterEach(() => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

async function proxy(options?: { refuse?: number }): Promise<ConnectProxy> {
  const started = await startConnectProxy(options);
  onTestFinished(() => started.close());
  return started;
}

function failure(promise: Promise<unknown>): Promise<HandshakeError> {
  return promise.then(
    () => {
      throw new Error("unexpectedly succeeded");
    },
    (e: unknown) => e as HandshakeError,
  );
}

describe.each(VARIANTS)("$name", (variant) => {
  const envVar = variant.tls ? "HTTPS_PROXY" : "http_proxy";

  test(`${envVar} routes the tunnel through the proxy's CONNECT`, async () => {
    const relay = await proxy();
    process.env[envVar] = relay.url;
    const server = await startServer(variant, {
      onConnection: (c) => c.stream.write(Buffer.from("via proxy")),
    });
    const { proxy: _omit, ...options } = server.dialOptions;
    const client = await dialed(server.url, options);
    expect((await readBytes(client.stream, 9)).toString()).toBe("via proxy");
    expect(relay.connects).toEqual([`127.0.0.1:${server.listener.address.port}`]);
    // The server sees the proxy's connection, which is also on loopback here.
    expect((await server.accepted.next()).remoteAddress).toBe("127.0.0.1");
  });

  test("NO_PROXY bypasses the proxy", async () => {
    const relay = await proxy();
    process.env[envVar] = relay.url;
    process.env.NO_PROXY = "example.com,127.0.0.1";
    const server = await startServer(variant);
    const { proxy: _omit, ...options } = server.dialOptions;
    await dialed(server.url, options);
    expect(relay.connects).toEqual([]);
  });

  test("an explicit proxy is used without the environment; proxy: false ignores it", async () => {
    const relay = await proxy();
    const server = await startServer(variant);
    await dialed(server.url, { ...server.dialOptions, proxy: relay.url });
    expect(relay.connects).toHaveLength(1);
    process.env[envVar] = relay.url;
    await dialed(server.url, { ...server.dialOptions, proxy: false });
    expect(relay.connects).toHaveLength(1);
  });

  test("a proxy refusing CONNECT gives HandshakeError via the proxy", async () => {
    const relay = await proxy({ refuse: 407 });
    const server = await startServer(variant);
    const err = await failure(dial(server.url, { ...server.dialOptions, proxy: relay.url }));
    expect(err.code).toBe("PROXY_REJECTED");
    expect(err.via).toBe("proxy");
    expect(err.status).toBe(407);
    expect(err.message).toContain("proxy refused CONNECT");
    expect(server.listener.acceptor.connections.size).toBe(0);
  });
});

test("a proxy that never answers CONNECT hits the handshake deadline and the proxy socket is closed", async () => {
  const sockets: Socket[] = [];
  const silent = createServer((socket) => {
    sockets.push(socket);
    socket.resume();
  });
  silent.listen(0, "127.0.0.1");
  await once(silent, "listening");
  onTestFinished(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const proxyUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  for (const http2 of [false, true]) {
    const err = await failure(
      dial("wss://127.0.0.1:9/", { http2, proxy: proxyUrl, handshakeTimeoutMs: 300 }),
    );
    expect(err.code).toBe("HANDSHAKE_TIMEOUT");
  }
  expect(sockets).toHaveLength(2);
  const closed = Promise.all(sockets.map((s) => (s.destroyed ? undefined : once(s, "close"))));
  await within(closed, 5000, "the proxy sockets to close");
});

test("unsupported proxy schemes are refused clearly", async () => {
  await expect(dial("ws://127.0.0.1:9/", { proxy: "socks5://127.0.0.1:1080" })).rejects.toThrow(
    /only http:\/\/ and https:\/\/ .*proxies are supported/,
  );
});
