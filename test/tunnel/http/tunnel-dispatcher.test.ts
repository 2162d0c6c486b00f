import { createServer } from "node:http";
import type { Duplex } from "node:stream";
import { errors, request, upgrade } from "undici";
import { afterEach, expect, test } from "vitest";
import { TunnelDispatcher } from "../../../lib/tunnel/http/index.ts";
import { within } from "../../support/until.ts";
import { closed, deferred, type Rig, TUNNEL_ORIGIN, tunnelRig } from "./harness.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

test("open() is called with each request's origin, scheme and port included", async () => {
  rig = await tunnelRig(createServer((req, res) => res.end(req.headers.host)));
  for (const origin of [
    "http://kubernetes.default.svc",
    "https://prometheus.monitoring:9090",
    TUNNEL_ORIGIN,
  ]) {
    const res = await request(rig.url("/x", origin), { dispatcher: rig.dispatcher });
    expect(await res.body.text()).toBe(new URL(origin).host);
  }
  expect(rig.origins).toEqual([
    "http://kubernetes.default.svc",
    "https://prometheus.monitoring:9090",
    "http://backend.test",
  ]);
});

test("the cap spans origins: an idle stream of one origin is closed for a request to another", async () => {
  const idleTimeoutMs = 30_000;
  let inFlight = 0;
  const both = deferred();
  rig = await tunnelRig(
    createServer(async (_req, res) => {
      if (++inFlight === 2) both.resolve();
      await both.promise;
      res.end("ok");
    }),
    { maxStreams: 2, idleTimeoutMs },
  );
  const get = async (origin: string) =>
    (await request(rig!.url("/", origin), { dispatcher: rig!.dispatcher })).body.text();
  // Two concurrent requests leave two kept-alive streams to origin A.
  expect(await Promise.all([get("http://a.test"), get("http://a.test")])).toEqual(["ok", "ok"]);
  expect(rig.client.open).toBe(2);
  const started = performance.now();
  expect(await within(get("http://b.test"), 3000, "request to origin B")).toBe("ok");
  // Served by evicting an idle stream, not by waiting out the 30 s keep-alive.
  expect(performance.now() - started).toBeLessThan(3000);
  expect(rig.client.all.filter((s) => s.closed)).toHaveLength(1);
  expect(rig.origins).toEqual(["http://a.test", "http://a.test", "http://b.test"]);
  // The cap is the client's: the server may still count the evicted stream for a moment, since its
  // close event follows the reset asynchronously.
  expect(rig.client.peak).toBe(2);
  expect(await get("http://a.test")).toBe("ok");
  expect(rig.client.peak).toBe(2);
});

test("upgraded streams count against the cap; a request that cannot get a stream fails with a connect timeout", async () => {
  const server = createServer((_req, res) => res.end("ok"));
  server.on("upgrade", (_req, socket: Duplex) => {
    socket.on("error", () => {});
    socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: raw\r\nConnection: Upgrade\r\n\r\n");
    socket.pipe(socket);
  });
  rig = await tunnelRig(server, { maxStreams: 1, connectTimeoutMs: 300 });
  const { socket } = await upgrade(rig.url("/attach"), { protocol: "raw", dispatcher: rig.dispatcher });
  expect((rig.dispatcher as TunnelDispatcher).openStreams).toBe(1);

  const err = await request(rig.url("/"), { dispatcher: rig.dispatcher }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(errors.ConnectTimeoutError);
  expect(rig.client.all).toHaveLength(1);

  socket.resume();
  socket.end();
  await within(closed(socket), 5000, "upgraded stream closing");
  const res = await request(rig.url("/"), { dispatcher: rig.dispatcher });
  expect(await res.body.text()).toBe("ok");
});

test("an open() failure fails the request and gives the slot back", async () => {
  const server = createServer((_req, res) => res.end("ok"));
  rig = await tunnelRig(server);
  let fail = true;
  const via = rig;
  const dispatcher = new TunnelDispatcher(
    async (origin) => {
      if (fail) throw new Error(`no tunnel to ${origin}`);
      return via.rawConnect();
    },
    { maxStreams: 1 },
  );
  try {
    await expect(request(rig.url("/"), { dispatcher })).rejects.toThrow("no tunnel to http://backend.test");
    expect(dispatcher.openStreams).toBe(0);
    fail = false;
    const res = await request(rig.url("/"), { dispatcher });
    expect(await res.body.text()).toBe("ok");
  } finally {
    await dispatcher.destroy();
  }
});

test("an open() that hangs is aborted at the connect timeout", async () => {
  rig = await tunnelRig(createServer((_req, res) => res.end("ok")));
  const aborted = deferred<unknown>();
  const dispatcher = new TunnelDispatcher(
    (_origin, { signal }) =>
      new Promise<Duplex>((_resolve, reject) => {
        signal.addEventListener("abort", () => {
          aborted.resolve(signal.reason);
          reject(signal.reason);
        });
      }),
    { connectTimeoutMs: 200 },
  );
  try {
    await expect(request(rig.url("/"), { dispatcher })).rejects.toBeInstanceOf(errors.ConnectTimeoutError);
    expect(await within(aborted.promise, 1000, "open() abort")).toBeInstanceOf(errors.ConnectTimeoutError);
    expect(dispatcher.openStreams).toBe(0);
  } finally {
    await dispatcher.destroy();
  }
});
