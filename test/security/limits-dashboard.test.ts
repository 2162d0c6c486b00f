// The dashboard's listener: a login form whose body never finishes, headers dribbled, a silent or
// idle connection are closed by the server within short configured deadlines; a live event stream
// is not cut by them; past the connection cap, connections are refused.
import { fetch } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { bundleDashboard } from "../../modules/dashboard/kas/assets.ts";
import { type DashboardServer, serveDashboard } from "../../modules/dashboard/kas/server.ts";
import { SESSION_COOKIE } from "../../modules/dashboard/kas/session.ts";
import { type ConnectionLimits, cookieValue } from "../../tool/http/serve/index.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import {
  CLOSE_MS,
  checkConnectionCap,
  closedForLimit,
  closedWithin,
  heldRequests,
  idleAfter,
  openConnection,
} from "../support/held-connections.ts";
import { MemoryViewsHub } from "../support/memory-views-hub.ts";
import { until } from "../support/until.ts";

const TOKEN = "a-dashboard-token-of-some-length";
const quiet = { error: () => {}, debug: () => {}, info: () => {} };
const LIMITS: ConnectionLimits = {
  headerTimeoutMs: 300,
  bodyTimeoutMs: 300,
  idleTimeoutMs: 300,
  maxConnections: 100,
  maxStreamsPerConnection: 100,
  unauthenticatedTimeoutMs: 300,
};

describe("dashboard: held connections are closed", () => {
  const hub = new MemoryViewsHub();
  let server: DashboardServer;
  let port: number;
  beforeAll(async () => {
    server = await serveDashboard({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      token: TOKEN,
      sessionTtlMs: 60_000,
      hub,
      assets: await bundleDashboard(),
      // No heartbeat within the test: the stream carries only what the hub says.
      heartbeatMs: 60_000,
      log: quiet,
      limits: LIMITS,
    });
    port = Number(new URL(server.url).port);
  });
  afterAll(async () => {
    await server?.close(0);
  });

  test("a silent connection, headers that never end and a login form that never finishes get 408 and are closed", async () => {
    const answers = await heldRequests(port, "/login", {
      "content-type": "application/x-www-form-urlencoded",
    });
    for (const answer of Object.values(answers)) expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });

  test("a keep-alive connection idle after its answer is closed", async () => {
    expect(await idleAfter(port, "GET /login HTTP/1.1\r\nHost: kas\r\n\r\n")).toMatch(/^HTTP\/1\.1 200 /);
  });

  test("a live event stream outlives every deadline", async () => {
    const login = await fetch(`${server.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: TOKEN }).toString(),
    });
    const cookie = `${SESSION_COOKIE}=${cookieValue(login.headers.get("set-cookie")!, SESSION_COOKIE)}`;
    const events = await fetch(`${server.url}/api/events`, { headers: { cookie } });
    expect(events.status).toBe(200);
    let text = "";
    const reader = events.body!.getReader();
    void (async () => {
      for (let r = await reader.read(); !r.done; r = await reader.read())
        text += Buffer.from(r.value).toString();
    })().catch(() => {});
    await until(() => hub.subscribers === 1, 5000, "the event stream to subscribe");
    // Opened after the stream, closed by the header deadline: once it is gone, the stream's
    // connection has outlived its own header, body and idle deadlines.
    const witness = await openConnection(port);
    await closedWithin(witness, CLOSE_MS, "a silent connection opened after the stream");
    hub.presence("7", true);
    await until(() => text.includes("connected"), 5000, "the stream's event after the deadlines");
    await reader.cancel();
  });
});

describe("dashboard in kas: connection_limits.max_connections", () => {
  let kas: InProcessKas;
  beforeAll(async () => {
    kas = await startInProcessKas((config) => {
      config.dashboard.listen.address = { host: "127.0.0.1", port: 0 };
      config.connectionLimits.maxConnections = 2;
    });
  });
  afterAll(async () => {
    await kas?.close();
  });

  test("connections past the cap are closed on arrival; under it again, a new one is served", async () => {
    await checkConnectionCap(
      Number(new URL(kas.addresses.dashboard!).port),
      2,
      "GET /login HTTP/1.1\r\nHost: kas\r\n\r\n",
    );
    // Counted where an operator sees floods (the log line is throttled).
    expect(
      await closedForLimit(kas.addresses.observability, "dashboard", "max connections"),
    ).toBeGreaterThanOrEqual(1);
  });
});
