import { createServer } from "node:http";
import type { Duplex } from "node:stream";
import { errors, request, upgrade } from "undici";
import { afterEach, expect, test } from "vitest";
import { serveHttp, TunnelDispatcher } from "../../../lib/tunnel/http/index.ts";
import { bindDraining } from "../../../lib/tunnel/session/index.ts";
import { until, within } from "../../support/until.ts";
import { closed, deferred, type Rig, sessionPair, TUNNEL_ORIGIN, tunnelRig } from "./harness.ts";

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

test("a stream whose tunnel drains is closed as soon as it is idle, never under a request", async () => {
  const release = deferred();
  let slowArrived = false;
  const server = createServer(async (req, res) => {
    if (req.url === "/slow") {
      slowArrived = true;
      await release.promise;
    }
    res.end("ok");
  });
  server.keepAliveTimeout = 60_000; // the server closes no idle connection on its own
  const sessions = await sessionPair();
  const served = serveHttp(server);
  sessions.server.on("stream", (s) => served.handle(s));
  // What a TunnelSession does for the streams it opens: they follow its draining signal.
  const draining = new AbortController();
  const streams: Duplex[] = [];
  const dispatcher = new TunnelDispatcher(
    async () => {
      const stream = await sessions.client.open();
      bindDraining(stream, draining.signal);
      streams.push(stream);
      return stream;
    },
    { idleTimeoutMs: 60_000 },
  );
  const get = async (path: string) =>
    (await request(new URL(path, TUNNEL_ORIGIN).href, { dispatcher })).body.text();
  try {
    // Kept-alive streams, idle; then a slow request on one of them or a new one.
    expect(await Promise.all([get("/"), get("/")])).toEqual(["ok", "ok"]);
    expect(streams).toHaveLength(2);
    const slow = get("/slow");
    await until(() => slowArrived, 5000, "the slow request at the server");

    draining.abort();
    // The idle ones close now, not after their 60 s keep-alive; the busy one carries on.
    await until(
      () => streams.filter((s) => s.closed).length === streams.length - 1,
      3000,
      "the idle streams closed",
    );
    release.resolve();
    expect(await slow).toBe("ok");
    // It closes once its response is done.
    await until(() => streams.every((s) => s.closed), 5000, "the busy stream closed after its response");
  } finally {
    release.resolve();
    await dispatcher.destroy();
    sessions.close();
  }
});
