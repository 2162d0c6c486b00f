import { once } from "node:events";
import { afterEach, expect, test, vi } from "vitest";
import {
  dial,
  HandshakeError,
  HandshakeRejection,
  RETRY_SCHEDULED_HEADER,
  type RetryInfo,
  serveTunnels,
  TunnelClient,
  type TunnelOptions,
  type TunnelServer,
  type TunnelSession,
} from "../../../lib/tunnel/index.ts";
import { HandshakePacer } from "../../../lib/tunnel/transport/handshake-pacer.ts";
import { readText } from "../../support/read-all.ts";
import { until } from "../../support/until.ts";

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

interface EchoServerOptions {
  port?: number;
  /** False: every handshake is refused with 401. */
  accept?: boolean;
  /** Runs on each session once it is up, after the echo is attached. */
  onSession?: (session: TunnelSession) => void;
  tunnel?: TunnelOptions;
}

/**
 * A tunnel server that echoes streams and records every session and every handshake attempt
 * (its time, and the dialing client's `x-client` header).
 */
async function echoServer({ port = 0, accept = true, onSession, tunnel }: EchoServerOptions = {}) {
  const sessions: TunnelSession[] = [];
  const attempts: Array<{ at: number; client: string | undefined }> = [];
  const server = await serveTunnels<undefined>({
    host: "127.0.0.1",
    port,
    ...(tunnel && { tunnel }),
    authenticate: (request) => {
      attempts.push({ at: performance.now(), client: request.headers["x-client"] as string | undefined });
      if (!accept) throw new HandshakeRejection(401, "token revoked");
      return undefined;
    },
    onSession: (s) => {
      sessions.push(s);
      s.on("stream", (st) => st.pipe(st));
      onSession?.(s);
    },
  });
  cleanup.push(() => server.close(100));
  return { server, sessions, attempts };
}

function client(
  server: TunnelServer<undefined>,
  extra: Partial<ConstructorParameters<typeof TunnelClient>[0]> = {},
) {
  const c = new TunnelClient({
    url: server.url,
    backoff: { initialMs: 20, maxMs: 200, jitter: 0 },
    ...extra,
  });
  cleanup.push(() => c.close(100));
  return c.start();
}

test("keeps a tunnel up and carries streams both ways", async () => {
  const { server, sessions } = await echoServer();
  const served: string[] = [];
  const c = client(server, {
    onStream: (st) => {
      served.push(`stream ${st.id}`);
      st.end("from the agent");
    },
  });
  const st = await c.open();
  st.end("ping");
  expect(await readText(st)).toBe("ping");
  const down = await sessions[0]!.open();
  down.end();
  expect(await readText(down)).toBe("from the agent");
  expect(served).toEqual(["stream 2"]);
});

test("rejected credentials back off like any failure: no tight retry loop", async () => {
  const { server, attempts } = await echoServer({ accept: false });
  const c = client(server, { backoff: { initialMs: 20, maxMs: 160, factor: 2, jitter: 0 } });
  const retries: RetryInfo[] = [];
  c.on("retry", (r) => retries.push(r));
  while (retries.length < 5) await once(c, "retry");
  expect(retries.map((r) => r.delayMs)).toEqual([20, 40, 80, 160, 160]);
  expect(new Set(retries.map((r) => r.reason))).toEqual(new Set(["dial"]));
  expect(retries[0]!.error).toBeInstanceOf(HandshakeError);
  expect(retries[0]!.error).toMatchObject({ status: 401, message: expect.stringMatching(/token revoked/) });
  // Each attempt came no sooner than the delay announced before it.
  for (let i = 1; i < 5; i++) {
    expect(attempts[i]!.at - attempts[i - 1]!.at).toBeGreaterThanOrEqual(retries[i - 1]!.delayMs - 1);
  }
});

/**
 * Runs a client with the default backoff (1 s, x1.6, up to 20 s; no jitter, to know the delays)
 * against a server that ends every tunnel right after its handshake, over `minutes` of fake time.
 * Each 'retry' is answered by moving the clock on by its delay; the handshakes the server saw are
 * counted per simulated minute.
 */
async function shedEveryTunnel(shed: (s: TunnelSession) => void, minutes: number) {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const { server, attempts } = await echoServer({ onSession: shed });
  const c = client(server, { backoff: { jitter: 0 } });
  const retries: RetryInfo[] = [];
  const perMinute = Array.from({ length: minutes }, () => 0);
  let now = 0;
  for (;;) {
    // Deadline on the real clock: a client in a tight loop would never announce a wait.
    const [retry] = (await once(c, "retry", { signal: AbortSignal.timeout(5000) }).catch(() => {
      throw new Error(`no wait announced within 5 s; the server saw ${attempts.length} handshakes`);
    })) as [RetryInfo];
    retries.push(retry);
    perMinute[Math.floor(now / 60_000)]!++;
    expect(attempts).toHaveLength(retries.length); // one handshake per wait: never two in a row
    if (now + retry.delayMs >= minutes * 60_000) break;
    now += retry.delayMs;
    vi.advanceTimersByTime(retry.delayMs);
  }
  return { retries, perMinute };
}

test.each([
  ["sends GoAway", "goaway", (s: TunnelSession) => s.goAway()],
  ["closes the tunnel", "closed", (s: TunnelSession) => s.destroy()],
] as const)(
  "a server that %s right after each handshake is redialed after growing delays, a few times a minute",
  async (_, reason, shed) => {
    const { retries, perMinute } = await shedEveryTunnel(shed, 3);
    expect(new Set(retries.map((r) => r.reason))).toEqual(new Set([reason]));
    expect(retries[0]!.error.message).toMatch(
      reason === "goaway" ? /GoAway \d+ ms after/ : /closed \d+ ms after/,
    );
    expect(retries.map((r) => r.delayMs).slice(0, 9)).toEqual([
      1000, 1600, 2560, 4096, 6554, 10486, 16777, 20000, 20000,
    ]);
    expect(retries.map((r) => r.attempt)).toEqual(retries.map((_, i) => i + 1));
    // 8 handshakes in the first minute while the delays grow, then one each 20 s.
    expect(perMinute).toEqual([8, 3, 3]);
  },
);

test("a place in a paced server's schedule beyond the backoff's next step is kept to without stepping it; any other Retry-After is a floor", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const place = (s: string) => ({ "retry-after": s, [RETRY_SCHEDULED_HEADER]: "1" });
  // The server's answers in turn.
  const answers: Array<[number, Record<string, string>]> = [
    [503, place("3")], // beyond the first step (1 s): kept to, no step
    [503, place("3")],
    [503, { "retry-after": "3" }], // the same wait, not marked (a proxy's, a limit's): a step, 3 s its floor
    [503, place("2")], // not beyond the next step (2 s): a step
    [401, {}],
  ];
  const server = await serveTunnels<undefined>({
    host: "127.0.0.1",
    authenticate: () => {
      const [status, headers] = answers.shift() ?? [401, {}];
      throw new HandshakeRejection(status, "not now", headers);
    },
    onSession: (s) => s.destroy(),
  });
  cleanup.push(() => server.close(100));
  const c = client(server, { backoff: { initialMs: 1000, maxMs: 10_000, factor: 2, jitter: 0 } });
  const retries: RetryInfo[] = [];
  for (let i = 0; i < 5; i++) {
    const retry = await next(c, "retry");
    retries.push(retry);
    vi.advanceTimersByTime(retry.delayMs);
  }
  const spread = (r: RetryInfo, ms: number) => {
    expect(r.delayMs).toBeGreaterThanOrEqual(ms);
    expect(r.delayMs).toBeLessThanOrEqual(ms * 1.2);
  };
  for (const r of retries.slice(0, 2)) {
    expect(r).toMatchObject({ attempt: 0, retryAfterMs: 3000, scheduled: true });
    spread(r, 3000);
  }
  expect(retries[2]).toMatchObject({ attempt: 1, retryAfterMs: 3000 });
  expect(retries[2]!.scheduled).toBeUndefined();
  spread(retries[2]!, 3000);
  expect(retries[3]).toMatchObject({ attempt: 2, retryAfterMs: 2000 });
  expect(retries[3]!.scheduled).toBeUndefined();
  spread(retries[3]!, 2000);
  expect(retries[4]).toMatchObject({ attempt: 3, delayMs: 4000 });
});

test("end to end: a paced server's refusal gives the client a place it keeps to, marked scheduled, without stepping its backoff", async () => {
  // The pending limit held full by handshakes in authentication; the pacer with a rate to go on
  // (as one that has taken arrivals before remembers it: 20/s).
  const capacity = vi.spyOn(HandshakePacer.prototype, "capacityPerMs", "get").mockReturnValue(0.02);
  cleanup.push(async () => capacity.mockRestore());
  let arrived = 0;
  let release!: () => void;
  const authenticating = new Promise<void>((resolve) => {
    release = resolve;
  });
  const server = await serveTunnels<undefined>({
    host: "127.0.0.1",
    maxLoopUtilization: 0.5,
    maxPendingHandshakes: 5,
    authenticate: async () => {
      arrived++;
      await authenticating;
    },
    onSession: (s) => s.destroy(),
  });
  cleanup.push(() => server.close(100));
  cleanup.push(async () => release());
  const held = Array.from({ length: 5 }, () => dial(server.url).then((c) => c.destroy()));
  await until(() => arrived === 5, 10_000, "the pending limit full of handshakes in authentication");
  const c = client(server, { backoff: { initialMs: 500, maxMs: 10_000, factor: 2, jitter: 0 } });
  const retry = await next(c, "retry");
  // A second (6 / 30 per s, rounded up) is beyond the backoff's first step of 500 ms: kept to.
  expect(retry).toMatchObject({ attempt: 0, reason: "dial", retryAfterMs: 1000, scheduled: true });
  expect(retry.delayMs).toBeGreaterThanOrEqual(1000);
  expect((retry.error as HandshakeError).status).toBe(503);
  expect(server.listener.acceptor.handshakeStats.refusedScheduled).toBe(1);
  await c.close(100);
  release();
  await Promise.all(held);
});

/** The next `event` of the client; the deadline is on the real clock, so fake timers do not stop it. */
async function next<E extends "connected" | "retry" | "stable">(c: TunnelClient, event: E) {
  const [value] = await once(c, event, { signal: AbortSignal.timeout(5000) });
  return value as E extends "retry" ? RetryInfo : TunnelSession;
}

test("the backoff starts over only once a tunnel has lasted stableAfterMs and the server has spoken", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const quiet = { keepAliveIntervalMs: 0 }; // no pings either way: only streams make the server speak
  let handshakes = 0;
  const { server, sessions } = await echoServer({
    tunnel: quiet,
    onSession: (s) => ++handshakes <= 2 && s.destroy(), // the first two tunnels end at once
  });
  const c = client(server, {
    backoff: { initialMs: 100, maxMs: 10_000, factor: 2, jitter: 0 },
    stableAfterMs: 1000,
    tunnel: quiet,
  });
  const stable: TunnelSession[] = [];
  c.on("stable", (s) => stable.push(s));
  for (const delay of [100, 200]) {
    expect((await next(c, "retry")).delayMs).toBe(delay);
    vi.advanceTimersByTime(delay);
  }

  // Third tunnel: the server answers at once, but it has not lasted long enough yet.
  const third = await next(c, "connected");
  const echo = await third.open();
  echo.end("hello");
  expect(await readText(echo)).toBe("hello");
  vi.advanceTimersByTime(999);
  expect(stable).toEqual([]);
  vi.advanceTimersByTime(1);
  expect(stable).toHaveLength(1);
  expect(stable[0]).toBe(third);
  sessions[2]!.destroy();
  expect(await next(c, "retry")).toMatchObject({ attempt: 1, delayMs: 100, reason: "closed" });
  vi.advanceTimersByTime(100);

  // Fourth tunnel: up five times stableAfterMs, but not a byte from the server.
  const fourth = await next(c, "connected");
  vi.advanceTimersByTime(5000);
  expect(fourth.stats.bytesIn).toBe(0);
  expect(stable).toHaveLength(1);
  sessions[3]!.destroy();
  expect(await next(c, "retry")).toMatchObject({ attempt: 2, delayMs: 200, reason: "closed" });
});

test("reconnects when the server comes back after a restart", async () => {
  const first = await echoServer();
  const port = first.server.listener.address.port;
  const c = client(first.server);
  await c.ready(5000);
  const disconnected = once(c, "disconnected");
  await first.server.close(0);
  await disconnected;
  expect(c.active).toBeUndefined();
  const second = await echoServer({ port });
  const [session] = (await once(c, "connected")) as [TunnelSession];
  expect(second.sessions).toHaveLength(1);
  const st = await session.open();
  st.end("after restart");
  expect(await readText(st)).toBe("after restart");
});

test("GoAway on a stable tunnel: the replacement is dialed at once, before the old one lets its streams finish", async () => {
  const { server, sessions } = await echoServer();
  const c = client(server, { stableAfterMs: 50 });
  const retries: RetryInfo[] = [];
  c.on("retry", (r) => retries.push(r));
  const old = await c.ready(5000);
  const inFlight = await old.open();
  inFlight.write("started before the drain, ");
  await once(inFlight, "readable");
  await once(c, "stable"); // up 50 ms and the server has spoken: a GoAway now is a drain

  const events: string[] = [];
  c.on("connected", () => events.push("replacement up"));
  old.once("close", () => events.push("old closed"));
  const drained = sessions[0]!.close(10_000);
  const [replacement] = (await once(c, "connected")) as [TunnelSession];
  expect(replacement).not.toBe(old);
  expect(c.active).toBe(replacement);
  expect(old.closed).toBe(false); // still carrying its stream

  const reading = readText(inFlight);
  inFlight.end("finished after it");
  expect(await reading).toBe("started before the drain, finished after it");
  await drained;
  expect(events).toEqual(["replacement up", "old closed"]);

  const next = await c.open();
  next.end("on the new tunnel");
  expect(await readText(next)).toBe("on the new tunnel");
  expect(sessions[1]!.stats.bytesIn).toBeGreaterThan(0);
  expect(retries).toEqual([]); // no backoff delay anywhere
});

test("stop() ends every tunnel and dials no more, while the server goes on", async () => {
  // The server cuts every tunnel of the "control" client at once: that client redials after each
  // 10 ms delay. A stopped client that still dialed would do the same in the same time.
  const { server, sessions, attempts } = await echoServer();
  const fast = { initialMs: 10, maxMs: 10, jitter: 0 };
  const stopped = client(server, { dial: { headers: { "x-client": "stopped" } }, backoff: fast });
  await stopped.ready(5000);
  const serverSide = once(sessions[0]!, "close");
  await stopped.close(1000);
  await serverSide;
  expect(stopped.sessions.size).toBe(0);

  const control = client(server, { dial: { headers: { "x-client": "control" } }, backoff: fast });
  for (let i = 0; i < 3; i++) {
    const [tunnel] = (await once(control, "connected")) as [TunnelSession];
    tunnel.destroy(); // the client takes this for a tunnel that did not last: 10 ms, then it redials
  }
  await once(control, "connected");
  expect(attempts.map((a) => a.client)).toEqual(["stopped", "control", "control", "control", "control"]);
  expect(server.listener.server.listening).toBe(true);
  await expect(stopped.ready(50)).rejects.toThrow(/stopped/);
});
