// The dashboard's login and sessions as an attacker sees them, over real HTTP on loopback: a burst
// of guesses gets no more verdicts than the throttle allows, and a session that logged out stays out
// (on every kas replica sharing a real redis-server), as does every session once the operator
// raises the session generation.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { type IncomingHttpHeaders, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { fetch } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type DashboardServer, serveDashboard } from "../../modules/dashboard/kas/server.ts";
import { SESSION_COOKIE } from "../../modules/dashboard/kas/session.ts";
import { cookieValue } from "../../tool/http/serve/index.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { MemoryViewsHub } from "../support/memory-views-hub.ts";
import { rawExchange } from "../support/raw-http.ts";
import { RedisServer } from "../support/redis-server.ts";
import { until, within } from "../support/until.ts";

const TOKEN = "a-dashboard-token-of-some-length";
const quiet = { error: () => {}, debug: () => {}, info: () => {} };
const noAssets = { "app.js": Buffer.from(""), "app.css": Buffer.from("") };

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
}

/**
 * A login form sent as a browser may: `Expect: 100-continue`, the body only once the server has
 * said "100 Continue", which it says as it hands the request to the dashboard's handler. `heard`
 * is told then; the body goes once `gate` opens. With the gate opened after the whole burst was
 * heard, every guess is in the handler before any of them has a body: a throttle that counts only
 * finished verdicts lets them all through.
 */
function heldLogin(url: string, token: string, heard: () => void, gate: Promise<void>): Promise<Answer> {
  const form = new URLSearchParams({ token }).toString();
  return new Promise((resolve, reject) => {
    const req = request(`${url}/login`, {
      method: "POST",
      agent: false, // a connection of its own: concurrent, as an attacker's burst is
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "content-length": Buffer.byteLength(form),
        expect: "100-continue",
      },
    });
    req.on("continue", () => {
      heard();
      void gate.then(() => req.end(form));
    });
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      // Refused before its body was read: the form need not be sent at all.
      req.destroy();
    });
    req.on("error", reject);
    req.flushHeaders();
  });
}

describe("login throttle", () => {
  test("a burst of concurrent guesses from one address gets at most the limit's worth of verdicts", async () => {
    const limit = 10;
    const burst = 100;
    const dashboard = await serveDashboard({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      token: TOKEN,
      sessionTtlMs: 60_000,
      hub: new MemoryViewsHub(),
      assets: noAssets,
      maxLoginFailures: limit,
      log: quiet,
    });
    try {
      let open!: () => void;
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      let heard = 0;
      const onHeard = () => {
        if (++heard === burst) open();
      };
      const answers = await Promise.all(
        Array.from({ length: burst }, (_, i) => heldLogin(dashboard.url, `guess-${i}`, onHeard, gate)),
      );
      const statuses = answers.map((res) => res.status);
      const compared = statuses.filter((s) => s === 401).length;
      const refused = answers.filter((res) => res.status === 429);
      expect({ compared, refused: refused.length }).toEqual({ compared: limit, refused: burst - limit });
      for (const res of refused) expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
      // The right token from that address is refused too while the window lasts: no verdict at all.
      const late = await heldLogin(dashboard.url, TOKEN, () => {}, Promise.resolve());
      expect(late.status).toBe(429);
      expect(late.headers["set-cookie"]).toBeUndefined();
    } finally {
      await dashboard.close(100);
    }
  });
});

/** Logs in at the dashboard at `url`; the Cookie header value of the session it got. */
async function logIn(url: string): Promise<string> {
  const res = await fetch(`${url}/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token: TOKEN }).toString(),
  });
  expect(res.status).toBe(303);
  return `${SESSION_COOKIE}=${cookieValue(res.headers.get("set-cookie")!, SESSION_COOKIE)}`;
}

const logOut = (url: string, cookie: string) =>
  fetch(`${url}/logout`, { method: "POST", redirect: "manual", headers: { cookie } });

/** The status of `GET /api/agents` with `cookie`: 200 while the session holds, 401 once it does not. */
const agentsStatus = async (url: string, cookie: string) =>
  (await fetch(`${url}/api/agents`, { headers: { cookie } })).status;

/** An event stream opened with `cookie`; `ended` settles with all it said once the server ends it. */
async function openStream(url: string, cookie: string): Promise<{ ended: Promise<string>; cancel(): void }> {
  const controller = new AbortController();
  const res = await fetch(`${url}/api/events`, { headers: { cookie }, signal: controller.signal });
  expect(res.status).toBe(200);
  const ended = (async () => {
    let text = "";
    for await (const chunk of res.body!) text += Buffer.from(chunk).toString();
    return text;
  })();
  ended.catch(() => {}); // cancelled by the test when it is not expected to end
  return { ended, cancel: () => controller.abort() };
}

describe("logout", () => {
  let dashboard: DashboardServer;
  beforeAll(async () => {
    dashboard = await serveDashboard({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      token: TOKEN,
      sessionTtlMs: 60_000,
      hub: new MemoryViewsHub(),
      assets: noAssets,
      heartbeatMs: 60_000,
      log: quiet,
    });
  });
  afterAll(async () => {
    await dashboard?.close(100);
  });

  test("a cookie copied before the logout is refused after it, and its open event stream ends", async () => {
    const cookie = await logIn(dashboard.url);
    const other = await logIn(dashboard.url); // another browser's session
    const stream = await openStream(dashboard.url, cookie);
    const otherStream = await openStream(dashboard.url, other);
    try {
      expect(await agentsStatus(dashboard.url, cookie)).toBe(200);
      const out = await logOut(dashboard.url, cookie);
      expect(out.status).toBe(303);
      expect(out.headers.get("location")).toBe("/login");
      expect(out.headers.get("set-cookie")).toContain("Max-Age=0");

      // The copy still in the attacker's hands: refused everywhere a session is needed.
      const api = await fetch(`${dashboard.url}/api/agents`, { headers: { cookie } });
      expect(api.status).toBe(401);
      expect(await api.json()).toEqual({ error: "log in first: no valid dashboard session" });
      expect((await fetch(`${dashboard.url}/api/events`, { headers: { cookie } })).status).toBe(401);
      const page = await fetch(`${dashboard.url}/`, { redirect: "manual", headers: { cookie } });
      expect(page.status).toBe(303);
      expect(page.headers.get("location")).toBe("/login");
      expect(await within(stream.ended, 5000, "the logged-out session's stream to end")).toContain(
        ": logged out",
      );

      // Only that session: the other browser stays logged in, its stream open.
      expect(await agentsStatus(dashboard.url, other)).toBe(200);
      expect(dashboard.streams).toBe(1);
      // A new login works as before.
      expect(await agentsStatus(dashboard.url, await logIn(dashboard.url))).toBe(200);
    } finally {
      stream.cancel();
      otherStream.cancel();
    }
  });
});

describe("logout and revocation across kas replicas sharing Redis", () => {
  let dir: string;
  let redis: RedisServer;
  let a: InProcessKas;
  let b: InProcessKas;
  const replicas: InProcessKas[] = [];
  /** A kas replica with the dashboard, sharing `redis`, at session generation `generation`. */
  const replica = async (generation = 1) => {
    const kas = await startInProcessKas(
      (config) => {
        config.dashboard.listen.address = { host: "127.0.0.1", port: 0 };
        config.dashboard.tokenFile = join(dir, "dashboard_token");
        config.dashboard.sessionGeneration = generation;
      },
      { redis: { host: redis.host, port: redis.port } },
    );
    replicas.push(kas);
    return kas;
  };
  const urlOf = (kas: InProcessKas) => kas.addresses.dashboard!;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "dashboard-security-"));
    await writeFile(join(dir, "dashboard_token"), TOKEN);
    redis = await RedisServer.start();
    [a, b] = await Promise.all([replica(), replica()]);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((kas) => kas.close()));
    await redis?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test("a session logged out on one replica is refused on the others, its streams there end", async () => {
    // The replicas hear of logouts on a Redis channel: wait until both listen, or B could miss it.
    const observer = new Redis({ ...redis.connection, lazyConnect: true });
    await observer.connect();
    const channel = `${a.config.redis.keyPrefix}:broadcast:dashboard_session_revoked`;
    const listening = async () => Number(((await observer.pubsub("NUMSUB", channel)) as [string, number])[1]);
    await until(async () => (await listening()) === 2, 10_000, "both replicas to listen for logouts").finally(
      () => observer.disconnect(),
    );
    const cookie = await logIn(urlOf(a));
    const other = await logIn(urlOf(b));
    expect(await agentsStatus(urlOf(b), cookie)).toBe(200); // one key: any replica takes the cookie
    const streamOnB = await openStream(urlOf(b), cookie);
    try {
      expect((await logOut(urlOf(a), cookie)).status).toBe(303);
      expect(await agentsStatus(urlOf(a), cookie)).toBe(401);
      expect(await agentsStatus(urlOf(b), cookie)).toBe(401);
      expect(await within(streamOnB.ended, 5000, "B's stream of the session to end")).toContain(
        ": logged out",
      );
      // A replica that was not there to hear of the logout finds it in Redis.
      const late = await replica();
      expect(await agentsStatus(urlOf(late), cookie)).toBe(401);
      expect(await agentsStatus(urlOf(late), other)).toBe(200);
      expect(await agentsStatus(urlOf(a), other)).toBe(200);
    } finally {
      streamOnB.cancel();
    }
  });

  test("raising the session generation ends every session; the same generation keeps them", async () => {
    const cookie = await logIn(urlOf(a));
    const raised = await replica(2);
    expect(await agentsStatus(urlOf(raised), cookie)).toBe(401);
    const page = await fetch(`${urlOf(raised)}/`, { redirect: "manual", headers: { cookie } });
    expect(page.headers.get("location")).toBe("/login");
    expect(await agentsStatus(urlOf(raised), await logIn(urlOf(raised)))).toBe(200);
    // What refused the cookie was the generation: a replica at the old one still takes it.
    expect(await agentsStatus(urlOf(b), cookie)).toBe(200);
  });

  test("without Redis to ask, a session is refused (503), not let in; a logout is not lost", async () => {
    const cookie = await logIn(urlOf(a));
    await redis.stop();
    try {
      // The page needs nothing else of Redis: only the revocation check can refuse it.
      expect((await fetch(`${urlOf(b)}/`, { redirect: "manual", headers: { cookie } })).status).toBe(503);
      const refused = await fetch(`${urlOf(b)}/api/agents`, { headers: { cookie } });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("5");
      expect(await refused.json()).toEqual({
        error: "cannot tell whether this dashboard session was logged out: try again",
      });
      const out = await logOut(urlOf(b), cookie);
      expect(out.status).toBe(503);
      expect(out.headers.get("set-cookie")).toBeNull(); // kept, to log out again
      expect(await out.json()).toEqual({
        error: "the logout could not be recorded for every kas replica: try again",
      });
      expect(await agentsStatus(urlOf(b), cookie)).toBe(401); // B refuses it from now on all the same
    } finally {
      await redis.start();
    }
    await until(
      async () => (await logOut(urlOf(b), cookie)).status === 303,
      10_000,
      "the logout, Redis back",
    );
    // A may still be reconnecting to Redis (503 meanwhile); once it can ask, the logout is there.
    let onA = 503;
    await until(
      async () => {
        onA = await agentsStatus(urlOf(a), cookie);
        return onA !== 503;
      },
      10_000,
      "A to reach Redis again",
    );
    expect(onA).toBe(401);
  });
});

describe("a dashboard without a token (loopback only)", () => {
  test("answers only to loopback host names: a rebound name gets 403, never the agents' views", async () => {
    const dashboard = await serveDashboard({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      sessionTtlMs: 60_000,
      hub: new MemoryViewsHub(),
      assets: noAssets,
      log: quiet,
    });
    try {
      const port = Number(new URL(dashboard.url).port);
      const get = (host: string) =>
        rawExchange(port, `GET /api/agents HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`);
      for (const host of ["attacker.example", "attacker.example:80", `127.0.0.1.nip.example:${port}`, ""]) {
        const answer = await get(host);
        expect(answer.status, host).toBe(403);
        expect(answer.body).not.toContain("agents");
      }
      for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, "[::1]", "LOCALHOST"])
        expect((await get(host)).status, host).toBe(200);
    } finally {
      await dashboard.close(0);
    }
  });
});
