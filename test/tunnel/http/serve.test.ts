import { createServer, Server } from "node:http";
import type { Duplex } from "node:stream";
import { request, upgrade } from "undici";
import { afterEach, expect, test } from "vitest";
import { type HttpStreamServer, serveHttp, TunnelDispatcher } from "../../../lib/tunnel/http/index.ts";
import { within } from "../../support/until.ts";
import { closed, deferred, type Rig, sessionPair, tunnelRig } from "./harness.ts";

let rig: (Rig & { served: HttpStreamServer }) | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

test("a bare request handler is served, and req.socket carries the given peer", async () => {
  const sessions = await sessionPair();
  const served = serveHttp((req, res) => res.end(`${req.socket.remoteAddress}:${req.socket.remotePort}`));
  expect(served.server).toBeInstanceOf(Server);
  sessions.server.on("stream", (stream) =>
    served.handle(stream, { remoteAddress: "10.1.2.3", remotePort: 4321 }),
  );
  const dispatcher = new TunnelDispatcher(() => sessions.client.open());
  try {
    const res = await request("http://svc.test/", { dispatcher });
    expect(await res.body.text()).toBe("10.1.2.3:4321");
    await served.close();
  } finally {
    await dispatcher.destroy();
    sessions.close();
  }
});

test("close() ends idle streams, lets in-flight requests finish with Connection: close, then resolves", async () => {
  const release = deferred();
  let held = 0;
  const bothHeld = deferred();
  rig = await tunnelRig(
    createServer(async (req, res) => {
      if (req.url === "/slow") {
        if (++held === 2) bothHeld.resolve();
        await release.promise;
      }
      res.end(req.url);
    }),
  );
  const get = (path: string) => request(rig!.url(path), { dispatcher: rig!.dispatcher });
  // Two streams: one becomes idle, one keeps a request in flight.
  const fast = get("/fast-after-slow");
  const slow1 = get("/slow");
  const slow2 = get("/slow");
  await within(bothHeld.promise, 5000, "both slow requests at the server");
  expect(await (await fast).body.text()).toBe("/fast-after-slow");
  expect(rig.accepted.open).toBe(3);

  let closeDone = false;
  const closing = rig.served.close().then(() => {
    closeDone = true;
  });
  // The idle stream goes now; the busy ones stay until their responses are out.
  await within(closed(rig.accepted.all[0]!), 5000, "idle stream closing");
  expect(rig.accepted.open).toBe(2);
  expect(closeDone).toBe(false);

  release.resolve();
  const [r1, r2] = await Promise.all([slow1, slow2]);
  expect(r1.headers.connection).toBe("close");
  expect(r2.headers.connection).toBe("close");
  expect(await r1.body.text()).toBe("/slow");
  expect(await r2.body.text()).toBe("/slow");
  await within(closing, 5000, "close() resolving");
  expect(rig.accepted.open).toBe(0);

  // Streams arriving after close() are turned away.
  const late = await rig.rawConnect();
  late.on("error", () => {});
  await within(closed(late), 5000, "late stream refused");
  expect(rig.accepted.all.at(-1)!.destroyed).toBe(true);
});

test("close() resets streams still busy after graceMs", async () => {
  rig = await tunnelRig(createServer(() => {})); // never answers
  const pending = request(rig.url("/hang"), { dispatcher: rig.dispatcher });
  pending.catch(() => {});
  await within(new Promise((r) => rig!.server.once("request", r)), 5000, "request reaching the server");
  const started = performance.now();
  await within(rig.served.close(200), 5000, "close() resolving");
  expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  await expect(pending).rejects.toThrow();
  expect(rig.accepted.open).toBe(0);
});

test("close() leaves upgraded streams to their upgrade handler", async () => {
  const server = createServer();
  server.on("upgrade", (_req, socket: Duplex) => {
    socket.on("error", () => {});
    socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: raw\r\nConnection: Upgrade\r\n\r\n");
    socket.pipe(socket);
  });
  rig = await tunnelRig(server);
  const { socket } = await upgrade(rig.url("/"), { protocol: "raw", dispatcher: rig.dispatcher });
  await within(rig.served.close(60_000), 5000, "close() resolving");
  socket.write("still here");
  const [echo] = (await within(
    new Promise((r) => socket.once("data", (d) => r([d]))),
    5000,
    "echo after close()",
  )) as [Buffer];
  expect(echo.toString()).toBe("still here");
  socket.end();
  await within(closed(socket), 5000, "upgraded stream closing");
});
