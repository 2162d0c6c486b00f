// The dashboard's listener over real HTTP: the login exchange (token -> signed HttpOnly,
// SameSite=Strict cookie), what is refused without it, and the event stream from the views hub.
import { createHmac } from "node:crypto";
import { SignJWT } from "jose";
import { fetch } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AgentViews } from "../../../modules/cluster_views/views.ts";
import { AgentStatuses } from "../../../modules/dashboard/kas/agent-status.ts";
import { bundleDashboard } from "../../../modules/dashboard/kas/assets.ts";
import { MemoryHistoryStore } from "../../../modules/dashboard/kas/history-store.ts";
import { type DashboardServer, serveDashboard } from "../../../modules/dashboard/kas/server.ts";
import { SESSION_COOKIE } from "../../../modules/dashboard/kas/session.ts";
import { cookieValue } from "../../../tool/http/serve/index.ts";
import { MemoryViewsHub } from "../../support/memory-views-hub.ts";
import { until } from "../../support/until.ts";

const TOKEN = "a-dashboard-token-of-some-length";
const quiet = { error: () => {}, debug: () => {}, info: () => {} };

const agent = (agentId: string, seq: number, ready: number): AgentViews => ({
  agentId,
  connected: true,
  seq,
  updatedAt: new Date(0).toISOString(),
  views: {
    nodes: {
      total: 2,
      ready,
      capacity: { cpuMillis: 2000, memoryBytes: 1 << 30 },
      allocatable: { cpuMillis: 2000, memoryBytes: 1 << 30 },
    },
  },
});

let hub: MemoryViewsHub;
let server: DashboardServer;
const history = new MemoryHistoryStore();
const streamsSeen: number[] = [];
beforeAll(async () => {
  hub = new MemoryViewsHub();
  hub.put(agent("1", 1, 2));
  server = await serveDashboard({
    listen: { address: { host: "127.0.0.1", port: 0 } },
    token: TOKEN,
    sessionTtlMs: 60_000,
    hub,
    history,
    statuses: new AgentStatuses({
      connectedAgents: async () => [
        {
          agentId: "1",
          projectId: "7",
          agentName: "prod",
          tunnels: 1,
          connectedSince: new Date(0).toISOString(),
        },
      ],
      configuration: async () => ({ commitId: "c0ffee", configuration: { secret: "not shown" } }) as never,
      gitops: async () =>
        new Map([
          [
            "group/manifests",
            {
              sync: {
                commitId: "c0ffee",
                at: "x",
                counts: { applied: 2, unchanged: 1, failed: 1, skipped: 3 },
              },
            },
          ],
        ]),
    }),
    assets: await bundleDashboard(),
    heartbeatMs: 50,
    log: quiet,
    onStreams: (n) => streamsSeen.push(n),
  });
});
afterAll(async () => {
  await server?.close(1000);
});

const get = (path: string, cookie?: string, signal?: AbortSignal) =>
  fetch(`${server.url}${path}`, { redirect: "manual", headers: { ...(cookie && { cookie }) }, signal });
/** The login form posted to `url` (default: the suite's dashboard). */
const login = (token: string, url = server.url) =>
  fetch(`${url}/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token }).toString(),
  });
async function session(): Promise<string> {
  const res = await login(TOKEN);
  return `${SESSION_COOKIE}=${cookieValue(res.headers.get("set-cookie")!, SESSION_COOKIE)}`;
}

describe("without a session", () => {
  test("the page sends the browser to the login page, the API answers 401", async () => {
    const page = await get("/");
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe("/login");
    const form = await get("/login");
    expect(form.status).toBe(200);
    expect(await form.text()).toContain('<form method="post" action="/login">');
    for (const path of [
      "/api/agents",
      "/api/events",
      "/api/status",
      "/api/changes",
      "/api/history?agent=1",
    ]) {
      const res = await get(path);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "log in first: no valid dashboard session" });
    }
  });

  test("a wrong token is refused with the login page again, and no cookie", async () => {
    for (const token of ["", "nope", `${TOKEN}x`, TOKEN.slice(0, -1)]) {
      const res = await login(token);
      expect(res.status).toBe(401);
      expect(res.headers.get("set-cookie")).toBeNull();
      expect(await res.text()).toContain("Wrong token: try again.");
    }
  });

  test("cookies not signed by this dashboard's key, or without a session id, are refused", async () => {
    const forged = async (key: Uint8Array, aud = "kas-dashboard", exp = "1m", jti: string | null = "s-1") => {
      const jwt = new SignJWT({})
        .setProtectedHeader({ alg: "HS256" })
        .setIssuer("gitlab-kas")
        .setAudience(aud)
        .setIssuedAt()
        .setExpirationTime(exp);
      if (jti !== null) jwt.setJti(jti);
      return `${SESSION_COOKIE}=${await jwt.sign(key)}`;
    };
    const keyOf = (token: string, generation: number) =>
      createHmac("sha256", token).update(`kas dashboard session key, generation ${generation}`).digest();
    const rightKey = keyOf(TOKEN, 1);
    const good = await session();
    const cookies = [
      await forged(keyOf("another token", 1)),
      await forged(keyOf(TOKEN, 2)), // another generation's
      await forged(rightKey, "gitlab-kas"),
      await forged(rightKey, "kas-dashboard", "-1m"),
      await forged(rightKey, "kas-dashboard", "1m", null), // could never be revoked
      `${SESSION_COOKIE}=${good.split("=")[1]!.slice(0, -2)}xx`,
      `${SESSION_COOKIE}=garbage`,
    ];
    for (const [i, cookie] of cookies.entries())
      expect([i, (await get("/api/agents", cookie)).status]).toEqual([i, 401]);
    // The same construction with the right key is accepted: what was refused above was the flaw.
    expect((await get("/api/agents", await forged(rightKey))).status).toBe(200);
  });
});

describe("with a session", () => {
  test("the login sets a signed, HttpOnly, SameSite=Strict cookie that opens the page and the API", async () => {
    const res = await login(TOKEN);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/");
    const setCookie = res.headers.get("set-cookie")!;
    expect(setCookie).toMatch(new RegExp(`^${SESSION_COOKIE}=[\\w-]+\\.[\\w-]+\\.[\\w-]+;`));
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Strict");
    expect(setCookie).toContain("Max-Age=60");
    const cookie = await session();
    const page = await get("/", cookie);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(await page.text()).toContain('<script type="module" src="/app.js">');
    const agents = await get("/api/agents", cookie);
    expect(await agents.json()).toEqual({ agents: [agent("1", 1, 2)] });
    const logout = await fetch(`${server.url}/logout`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie },
    });
    expect(logout.headers.get("set-cookie")).toContain("Max-Age=0");
  });

  test("the event stream: a snapshot of each agent, then every change, heartbeats in between", async () => {
    const controller = new AbortController();
    const res = await get("/api/events", await session(), controller.signal);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    let text = "";
    const reading = (async () => {
      for await (const chunk of res.body!) text += Buffer.from(chunk).toString();
    })().catch(() => {});
    await until(() => text.includes("event: snapshot"), 5000, "the snapshot");
    hub.put(agent("1", 2, 1));
    hub.presence("1", false);
    await until(() => text.includes("event: disconnected"), 5000, "the disconnection");
    await until(() => text.includes(": heartbeat"), 5000, "a heartbeat");
    const events = text
      .split("\n\n")
      .filter((block) => block.includes("data: "))
      .map((block) => {
        const field = (name: string) => block.match(new RegExp(`^${name}: (.*)$`, "m"))?.[1];
        return { id: field("id"), event: field("event"), data: JSON.parse(field("data")!) };
      });
    expect(events.map((e) => [e.id, e.event])).toEqual([
      ["1:1", "snapshot"],
      ["1:2", "change"],
      ["1:2", "disconnected"],
    ]);
    expect(events[1]!.data.views.nodes.ready).toBe(1);
    expect(server.streams).toBe(1);
    controller.abort();
    await reading;
    await until(
      () => server.streams === 0 && hub.subscribers === 0,
      5000,
      "the stream and its subscription to end",
    );
    expect(streamsSeen.at(-1)).toBe(0);
  });
});

test("streams are bounded: in number, and a reader that stops reading is cut, not buffered for", async () => {
  const slowHub = new MemoryViewsHub();
  const drops: string[] = [];
  const small = await serveDashboard({
    listen: { address: { host: "127.0.0.1", port: 0 } },
    sessionTtlMs: 60_000,
    hub: slowHub,
    assets: { "app.js": Buffer.from(""), "app.css": Buffer.from("") },
    maxBufferedBytes: 64 * 1024,
    maxStreams: 1,
    log: quiet,
    onDrop: (reason) => drops.push(reason),
  });
  try {
    // No token: loopback only, no login. The response is never read.
    const res = await fetch(`${small.url}/api/events`);
    expect(res.status).toBe(200);
    await until(() => small.streams === 1, 5000, "the stream");
    const second = await fetch(`${small.url}/api/events`);
    expect(second.status).toBe(503); // one stream at most here
    expect(second.headers.get("retry-after")).toBe("5");
    const big = { ...agent("9", 0, 1) };
    for (let seq = 1; small.streams > 0 && seq < 100_000; seq++) {
      slowHub.put({
        ...big,
        seq,
        views: {
          ...big.views,
          pods: {
            namespaces: {
              [`ns-${"x".repeat(2000)}-${seq}`]: {
                phases: { Pending: 0, Running: seq, Succeeded: 0, Failed: 0, Unknown: 0 },
                restarts: 0,
              },
            },
          },
        },
      });
      if (seq % 100 === 0) await new Promise((r) => setImmediate(r));
    }
    expect(small.streams).toBe(0);
    expect(drops).toEqual(["too slow"]);
    expect(slowHub.subscribers).toBe(0);
    await res.body?.cancel().catch(() => {});
  } finally {
    await small.close(100);
  }
});

test("guessing is slowed down: after too many wrong tokens, logins from that address get 429", async () => {
  const guarded = await serveDashboard({
    listen: { address: { host: "127.0.0.1", port: 0 } },
    token: TOKEN,
    sessionTtlMs: 60_000,
    hub: new MemoryViewsHub(),
    assets: { "app.js": Buffer.from(""), "app.css": Buffer.from("") },
    maxLoginFailures: 2,
    log: quiet,
  });
  const attempt = (token: string) => login(token, guarded.url);
  try {
    expect((await attempt("guess-1")).status).toBe(401);
    expect((await attempt(TOKEN)).status).toBe(303); // a right token still works below the bound
    expect((await attempt("guess-2")).status).toBe(401);
    const refused = await attempt(TOKEN);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(refused.headers.get("set-cookie")).toBeNull();
  } finally {
    await guarded.close(100);
  }
});

describe("the JSON API and the icon", () => {
  test("/api/status: each agent by name with its tunnels, configuration commit (never the configuration) and GitOps counts", async () => {
    const res = await get("/api/status", await session());
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      agents: [
        {
          agentId: "1",
          name: "prod",
          projectId: "7",
          tunnels: 1,
          connectedSince: new Date(0).toISOString(),
          agentk: [],
          configuration: { commitId: "c0ffee" },
          gitops: [
            { project: "group/manifests", sync: { commitId: "c0ffee", at: "x", applied: 3, failed: 1 } },
          ],
        },
      ],
    });
  });

  test("/api/changes and /api/history: from the history store; a malformed agent id is a 400", async () => {
    const cookie = await session();
    const change = {
      agentId: "1",
      at: new Date().toISOString(),
      kind: "scaled" as const,
      object: "Deployment shop/cart",
      text: "scaled from 3 to 5 replicas",
    };
    await history.changes("1", [change]);
    expect(await (await get("/api/changes", cookie)).json()).toEqual({ changes: [change] });
    expect(await (await get("/api/history?agent=1", cookie)).json()).toEqual({
      agentId: "1",
      samples: [],
      changes: [change],
    });
    for (const query of ["", "?agent=", "?agent=01", "?agent=1x"]) {
      const res = await get(`/api/history${query}`, cookie);
      expect(res.status).toBe(400);
    }
  });

  test("the favicon is served without a session (no 404 in the browser's console)", async () => {
    for (const path of ["/favicon.ico", "/favicon.svg"]) {
      const res = await get(path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("image/svg+xml");
      expect(await res.text()).toMatch(/^<svg /);
    }
    expect(await (await get("/login")).text()).toContain('<link rel="icon" href="/favicon.svg"');
  });
});
