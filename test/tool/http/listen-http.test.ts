import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { get as httpsGet } from "node:https";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKasMetrics } from "../../../cmd/kas/observability/index.ts";
import { HttpError, listenHttp } from "../../../tool/http/serve/index.ts";
import { memoryLogger } from "../../kas/auth/helpers.ts";
import { rawExchange } from "../../support/raw-http.ts";
import { testPki } from "../../support/tls-certs.ts";
import { until } from "../../support/until.ts";

describe("listenHttp (the fronts' listener)", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kas-listen-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const address = { host: "127.0.0.1", port: 0 };

  it("serves HTTPS from the configured certificate and key files", async () => {
    const pki = await testPki();
    const certificateFile = join(dir, "cert.pem");
    const keyFile = join(dir, "key.pem");
    await writeFile(certificateFile, pki.cert);
    await writeFile(keyFile, pki.key);
    const listener = await listenHttp({
      address,
      tls: { certificateFile, keyFile },
      front: "test",
      handler: (_req, res) => {
        res.end("secure");
      },
    });
    try {
      expect(listener.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const body = await new Promise<string>((resolve, reject) => {
        httpsGet(`${listener.url}/`, { ca: pki.caCert }, (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve(text));
        }).on("error", reject);
      });
      expect(body).toBe("secure");
    } finally {
      await listener.close(0);
    }
  });

  it("drain: still accepts and serves, every response says Connection: close, a kept-alive connection ends after its exchange", async () => {
    const listener = await listenHttp({ address, front: "test", handler: (_req, res) => void res.end("ok") });
    try {
      // A kept-alive connection, idle when the drain starts.
      const socket = connect(listener.port, "127.0.0.1");
      await once(socket, "connect");
      let received = "";
      socket.setEncoding("utf8").on("data", (d: string) => {
        received += d;
      });
      socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      await until(() => received.endsWith("ok"), 5000, "the first answer");
      expect(received.toLowerCase()).toContain("connection: keep-alive");

      listener.drain();
      // Not closed under its client: it takes the next request, answers it, then closes.
      expect(socket.destroyed).toBe(false);
      received = "";
      socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      await once(socket, "close");
      expect(received).toMatch(/^HTTP\/1\.1 200/);
      expect(received.toLowerCase()).toContain("connection: close");
      // New connections are still accepted (load balancers may not have seen readiness fail yet).
      const fresh = await rawExchange(listener.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      expect(fresh.status).toBe(200);
      expect(fresh.headers.connection).toBe("close");
    } finally {
      await listener.close(0);
    }
  });

  /** A raw keep-alive connection to `port` and what it has received. */
  async function keptAlive(port: number) {
    const socket = connect(port, "127.0.0.1");
    await once(socket, "connect");
    const got = { text: "" };
    socket.setEncoding("utf8").on("data", (d: string) => {
      got.text += d;
    });
    return { socket, got };
  }

  it("close: a connection that has just had its answer is not cut under its client: the next request is answered, with Connection: close", async () => {
    const listener = await listenHttp({ address, front: "test", handler: (_req, res) => void res.end("ok") });
    const { socket, got } = await keptAlive(listener.port);
    socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await until(() => got.text.endsWith("ok"), 5000, "the first answer");
    expect(got.text.toLowerCase()).toContain("connection: keep-alive");
    got.text = "";
    // The client sends its next request as kas stops accepting (both at once, as in a race).
    const closed = listener.close(10_000);
    socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await once(socket, "close");
    expect(got.text).toMatch(/^HTTP\/1\.1 200/);
    expect(got.text.toLowerCase()).toContain("connection: close");
    expect(got.text.endsWith("ok")).toBe(true);
    await closed;
  });

  it("close: a connection accepted before the stop whose request comes after it is answered, not cut", async () => {
    const listener = await listenHttp({ address, front: "test", handler: (_req, res) => void res.end("ok") });
    const { socket, got } = await keptAlive(listener.port);
    const accepted = () => new Promise<number>((r) => listener.server.getConnections((_e, n) => r(n)));
    await until(async () => (await accepted()) === 1, 5000, "the connection accepted");
    // As behind a TCP load balancer: it connected to kas before its client's request came.
    const closed = listener.close(10_000);
    socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await once(socket, "close");
    expect(got.text).toMatch(/^HTTP\/1\.1 200[\s\S]*connection: close[\s\S]*ok$/i);
    await closed;
  });

  it("close: a connection quiet for closeQuietMs is closed, and close resolves well within its grace", async () => {
    const listener = await listenHttp({
      address,
      front: "test",
      closeQuietMs: 100,
      handler: (_req, res) => void res.end("ok"),
    });
    const { socket, got } = await keptAlive(listener.port);
    socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await until(() => got.text.endsWith("ok"), 5000, "the answer");
    const closed = listener.close(60_000);
    await once(socket, "close");
    await closed;
  }, 10_000);

  it("close: refuses new connections, lets a response in flight finish, then resolves", async () => {
    let finish: (() => void) | undefined;
    const listener = await listenHttp({
      address,
      front: "test",
      handler: (_req, res) => {
        res.write("a");
        finish = () => res.end("b");
      },
    });
    const res = await fetch(listener.url);
    const reader = res.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("a");
    const closed = listener.close(10_000);
    await expect(fetch(listener.url)).rejects.toThrow();
    finish!();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("b");
    await closed;
  });

  it("close: upgraded connections get the grace period, then are cut", async () => {
    const listener = await listenHttp({
      address,
      front: "test",
      handler: (_req, res) => {
        res.end();
      },
      onUpgrade: (_req, socket) => {
        socket.write("HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\n");
        return 101;
      },
    });
    const socket = connect(listener.port, "127.0.0.1");
    socket.on("error", () => {});
    await once(socket, "connect");
    socket.write("GET / HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n");
    await once(socket, "data");
    const started = Date.now();
    await listener.close(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    if (!socket.closed) await once(socket, "close");
  });

  describe("the guard: every failure of a handler becomes an answer, a log line and a metric", () => {
    const failures: Record<string, () => unknown> = {
      throws: () => {
        throw new TypeError("bug with Bearer glpat-abcdefghijklmnopqrst");
      },
      rejects: async () => {
        await Promise.resolve();
        throw new TypeError("bug with Bearer glpat-abcdefghijklmnopqrst");
      },
    };
    const start = async (fail: (req: never, res: never) => unknown) => {
      const logs = memoryLogger();
      const metrics = createKasMetrics();
      const listener = await listenHttp({
        address,
        front: "test",
        log: logs.log,
        metrics: metrics.requests,
        routeOf: (req, upgrade) =>
          `${upgrade ? "upgrade" : "plain"}:${req.url?.startsWith("/bad") ? "/bad" : "other"}`,
        renderError: ({ status, message }) => ({ type: "text/x-test", body: `${status} ${message}` }),
        handler: fail as () => void,
        onUpgrade: fail as () => number,
      });
      const lines = () =>
        logs
          .text()
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as Record<string, unknown>);
      const count = async (route: string, status: string) => {
        const line = `kas_request_duration_seconds_count{route="${route}",status="${status}"} `;
        const text = await metrics.registry.metrics();
        return Number(
          text
            .split("\n")
            .find((l) => l.startsWith(line))
            ?.slice(line.length) ?? 0,
        );
      };
      return { listener, lines, count };
    };

    for (const [how, fail] of Object.entries(failures)) {
      it(`a request handler that ${how}: 500 in the front's format, logged with front, method and route, counted`, async () => {
        const { listener, lines, count } = await start(fail);
        try {
          const res = await fetch(`${listener.url}/bad?token=secret`, { method: "POST", body: "x" });
          expect(res.status).toBe(500);
          expect(res.headers.get("content-type")).toBe("text/x-test");
          expect(await res.text()).toBe("500 internal error");
          await until(async () => (await count("plain:/bad", "500")) === 1, 5000, "counted");
          const line = lines().find((l) => l.msg === "request failed");
          expect(line).toMatchObject({ level: 50, front: "test", method: "POST", route: "plain:/bad" });
          expect(JSON.stringify(lines())).not.toContain("glpat-abcdefghijklmnopqrst");
          expect(JSON.stringify(lines())).not.toContain("secret");
        } finally {
          await listener.close(0);
        }
      });

      it(`an Upgrade handler that ${how}: a raw 500 in the front's format, logged, counted`, async () => {
        const { listener, lines, count } = await start(fail);
        try {
          const answer = await rawExchange(
            listener.port,
            "GET /bad HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n",
          );
          expect(answer.statusLine).toBe("HTTP/1.1 500 Internal Server Error");
          expect(answer.headers["content-type"]).toBe("text/x-test");
          expect(answer.body).toBe("500 internal error");
          expect(await count("upgrade:/bad", "500")).toBe(1);
          expect(lines().find((l) => l.msg === "request failed")).toMatchObject({
            level: 50,
            front: "test",
            method: "GET",
            route: "upgrade:/bad",
          });
        } finally {
          await listener.close(0);
        }
      });
    }

    it("an HttpError is answered with its status, message and headers, and logged at debug level only", async () => {
      const { listener, lines } = await start(() => {
        throw new HttpError(418, "short and stout", { "x-teapot": "yes" });
      });
      try {
        const res = await fetch(`${listener.url}/bad`);
        expect(res.status).toBe(418);
        expect(res.headers.get("x-teapot")).toBe("yes");
        expect(await res.text()).toBe("418 short and stout");
        const answer = await rawExchange(
          listener.port,
          "GET /bad HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n",
        );
        expect(answer.status).toBe(418);
        expect(answer.headers["x-teapot"]).toBe("yes");
        expect(
          lines()
            .filter((l) => l.msg === "request refused")
            .map((l) => l.level),
        ).toEqual([20, 20]);
      } finally {
        await listener.close(0);
      }
    });

    it("a handler that fails after its headers went out: the response is cut, logged, counted as aborted", async () => {
      const { listener, lines, count } = await start(async (_req: unknown, res: ServerResponse) => {
        res.writeHead(200);
        await new Promise((resolve) => res.write("partial", resolve)); // "partial" is out
        throw new Error("upstream died");
      });
      try {
        const res = await fetch(`${listener.url}/bad`);
        expect(res.status).toBe(200);
        await expect(res.text()).rejects.toThrow();
        await until(async () => (await count("plain:/bad", "aborted")) === 1, 5000, "counted");
        expect(await count("plain:/bad", "200")).toBe(0);
        expect(lines().find((l) => l.msg === "response failed midway")).toMatchObject({
          level: 50,
          front: "test",
          route: "plain:/bad",
          err: { message: "upstream died" },
        });
      } finally {
        await listener.close(0);
      }
    });

    it("a client that resets an Upgrade connection while the handler works: logged at debug level, no crash", async () => {
      let upgraded: (() => void) | undefined;
      const handling = new Promise<void>((resolve) => {
        upgraded = resolve;
      });
      let closed: Promise<unknown> | undefined;
      const logs = memoryLogger();
      const listener = await listenHttp({
        address,
        front: "test",
        log: logs.log,
        handler: (_req, res) => {
          res.end();
        },
        onUpgrade: async (_req, socket) => {
          // Not events.once: its error listener would absorb the reset this test is about.
          closed = new Promise((resolve) => socket.once("close", resolve));
          upgraded!();
          await closed;
          return 499;
        },
      });
      try {
        const socket = connect(listener.port, "127.0.0.1");
        await once(socket, "connect");
        socket.write("GET / HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n");
        await handling;
        socket.resetAndDestroy();
        await closed;
        const line = JSON.parse(
          logs
            .text()
            .split("\n")
            .find((l) => l.includes("upgrade connection error"))!,
        );
        expect(line).toMatchObject({ level: 20, front: "test", err: { code: "ECONNRESET" } });
        expect((await fetch(listener.url)).status).toBe(200);
      } finally {
        await listener.close(0);
      }
    });
  });
});
