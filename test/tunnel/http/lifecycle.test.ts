import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { request } from "undici";
import { afterEach, describe, expect, test } from "vitest";
import { within } from "../../support/until.ts";
import { closed, deferred, next, type Rig, rigs } from "./harness.ts";

interface ServerView {
  req: IncomingMessage;
  res: ServerResponse;
  aborted: boolean;
  reqClosed: Promise<void>;
  resClosed: Promise<{ finished: boolean }>;
}

/** Records what the server side of one request saw. */
function watch(req: IncomingMessage, res: ServerResponse): ServerView {
  const view: ServerView = {
    req,
    res,
    aborted: false,
    reqClosed: next(req, "close"),
    resClosed: next(res, "close").then(() => ({ finished: res.writableFinished })),
  };
  req.on("aborted", () => {
    view.aborted = true;
  });
  req.on("error", () => {});
  return view;
}

describe.each(rigs)("connection lifecycle, %s", (kind, makeRig) => {
  let rig: Rig | undefined;
  afterEach(async () => {
    await rig?.close();
    rig = undefined;
  });

  test("aborting an upload resets the connection; the server's request sees 'aborted' and 'close'", async () => {
    let view!: ServerView;
    const firstData = deferred();
    rig = await makeRig(
      createServer((req, res) => {
        view = watch(req, res);
        req.once("data", () => firstData.resolve());
      }),
    );
    const body = new Readable({ read() {} });
    body.push(Buffer.alloc(1024, 1));
    const ac = new AbortController();
    const pending = request(rig.url("/upload"), {
      method: "POST",
      body,
      signal: ac.signal,
      dispatcher: rig.dispatcher,
    });
    pending.catch(() => {});
    await within(firstData.promise, 5000, "first upload bytes at the server");
    ac.abort();
    await expect(pending).rejects.toThrow(/abort/i);
    await within(view.reqClosed, 5000, "server request close");
    expect(view.aborted).toBe(true);
    expect(view.req.complete).toBe(false);
    expect(await within(view.resClosed, 5000, "server response close")).toEqual({ finished: false });
    await within(
      Promise.all([...rig.client.all, ...rig.accepted.all].map(closed)),
      5000,
      "both ends of the connection closing",
    );
    if (kind === "tunnel") {
      // The upload's stream was reset. (undici may have opened a spare connection that it resets
      // too, depending on timing, so the count is not fixed.)
      const codes = rig.accepted.errors.map((e) => e.code);
      expect(codes.length).toBeGreaterThanOrEqual(1);
      expect(new Set(codes)).toEqual(new Set(["ECONNRESET"]));
    }
  });

  test("aborting a download resets the connection; the server's response closes unfinished", async () => {
    let view!: ServerView;
    rig = await makeRig(
      createServer((req, res) => {
        view = watch(req, res);
        const tick = setInterval(() => res.write(Buffer.alloc(4096, 2)), 5);
        res.on("close", () => clearInterval(tick));
      }),
    );
    const ac = new AbortController();
    const res = await request(rig.url("/download"), { signal: ac.signal, dispatcher: rig.dispatcher });
    const it = res.body[Symbol.asyncIterator]();
    await within(it.next(), 5000, "first download bytes");
    ac.abort();
    await expect(it.next()).rejects.toThrow(/abort/i);
    expect(await within(view.resClosed, 5000, "server response close")).toEqual({ finished: false });
    await within(
      Promise.all([...rig.client.all, ...rig.accepted.all].map(closed)),
      5000,
      "both ends of the connection closing",
    );
  });

  test("an idle keep-alive connection closes its stream after the idle timeout, on both ends", async () => {
    rig = await makeRig(
      createServer((_req, res) => res.end("ok")),
      { idleTimeoutMs: 300 },
    );
    const res = await request(rig.url("/"), { dispatcher: rig.dispatcher });
    expect(await res.body.text()).toBe("ok");
    const idleSince = performance.now();
    expect(rig.client.open).toBe(1);
    await within(
      Promise.all([...rig.client.all, ...rig.accepted.all].map(closed)),
      5000,
      "idle connection closing",
    );
    expect(performance.now() - idleSince).toBeGreaterThanOrEqual(250);
    expect(rig.client.open).toBe(0);
    expect(rig.accepted.open).toBe(0);
  });

  test("node:http's keepAliveTimeout closes a connection the client leaves idle", async () => {
    const server = createServer((_req, res) => res.end("ok"));
    server.keepAliveTimeout = 100;
    rig = await makeRig(server);
    const conn = await rig.rawConnect();
    conn.on("error", () => {});
    conn.write("GET / HTTP/1.1\r\nHost: backend.test\r\n\r\n");
    let text = "";
    conn.setEncoding("latin1");
    while (!text.endsWith("\r\n\r\nok")) {
      const [chunk] = (await within(once(conn, "data"), 5000, "response")) as [string];
      text += chunk;
    }
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).toMatch(/\r\nKeep-Alive: timeout=0\r\n/i);
    const idleSince = performance.now();
    // node:http arms socket.setTimeout(keepAliveTimeout + 1 s) when the connection turns idle.
    await within(closed(conn), 5000, "server closing the idle connection");
    expect(performance.now() - idleSince).toBeGreaterThanOrEqual(900);
  });

  test("64 concurrent requests never use more connections than the cap (default 16)", async () => {
    const cap = 16;
    let inFlight = 0;
    let maxInFlight = 0;
    const full = deferred();
    rig = await makeRig(
      createServer(async (req, res) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (inFlight === cap) full.resolve();
        // Hold every response until the cap is reached, so the client is pushed against it.
        await full.promise;
        res.end(req.url);
        inFlight--;
      }),
    );
    const results = await within(
      Promise.all(
        Array.from({ length: 64 }, async (_, i) => {
          const res = await request(rig!.url(`/r/${i}`), { dispatcher: rig!.dispatcher });
          return res.body.text();
        }),
      ),
      20_000,
      "64 responses",
    );
    expect(results).toEqual(Array.from({ length: 64 }, (_, i) => `/r/${i}`));
    expect(rig.client.peak).toBe(cap);
    expect(rig.accepted.peak).toBe(cap);
    expect(maxInFlight).toBe(cap);
  });
});
