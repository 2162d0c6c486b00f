import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, expect, it, vi } from "vitest";
import { AGE_SLOTS, connectionAgeDelayMs } from "../../../cmd/kas/agents/connection-age.ts";
import { type AgentSession, serveAgents } from "../../../cmd/kas/agents/index.ts";
import { createAgentAuthenticate, loadStaticTokens } from "../../../cmd/kas/auth/index.ts";
import { Router } from "../../../lib/router/index.ts";
import { TunnelClient } from "../../../lib/tunnel/index.ts";
import { TOKEN, writeFixtures } from "../support/fixtures.ts";

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

it("drains each tunnel at max_connection_age give or take 10 %, not all at the same moment", async () => {
  // Fake timers from the start: each tunnel's age timer is set when it connects, all at fake time 0.
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const dir = await mkdtemp(join(tmpdir(), "kas-age-"));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  const { tokensFile } = await writeFixtures(dir);
  const router = await new Router({ defaultTimeoutMs: 1000 }).start();
  cleanup.push(() => router.close(0));
  const maxAgeMs = 60_000;
  const listener = await serveAgents({
    listen: { address: { host: "127.0.0.1", port: 0 } },
    authenticate: createAgentAuthenticate({ authenticator: await loadStaticTokens(tokensFile) }),
    router,
    maxConnectionAgeMs: maxAgeMs,
    tunnel: { keepAliveIntervalMs: 0 },
  });
  cleanup.push(() => listener.close(0));
  const clients = Array.from({ length: 8 }, () => {
    const client = new TunnelClient({
      url: listener.url,
      dial: { headers: { authorization: `Bearer ${TOKEN}` }, proxy: false },
      tunnel: { keepAliveIntervalMs: 0 },
    }).start();
    cleanup.push(() => client.close(0));
    return client;
  });
  await Promise.all(clients.map((c) => c.ready(5000)));
  const tunnels = [...listener.server.sessions];
  expect(tunnels).toHaveLength(8);

  // Move the clock in 100 ms steps past the latest possible drain; note when each tunnel got GoAway.
  const stepMs = 100;
  const drainedAt = new Map<AgentSession, number>();
  for (let now = stepMs; now <= maxAgeMs * 1.1 + stepMs; now += stepMs) {
    vi.advanceTimersByTime(stepMs);
    for (const t of tunnels) if (t.draining && !drainedAt.has(t)) drainedAt.set(t, now);
  }
  const times = [...drainedAt.values()];
  expect(times).toHaveLength(8);
  for (const at of times) {
    expect(at).toBeGreaterThanOrEqual(maxAgeMs * 0.9);
    expect(at).toBeLessThanOrEqual(maxAgeMs * 1.1 + stepMs);
  }
  // Eight draws over 120 steps: all in one step would be a chance of about 1 in 4e14.
  expect(new Set(times).size).toBeGreaterThan(1);
});

// Node keeps the timer list of each distinct duration; an unref'd timer cleared early (the agent
// left) keeps its list until the duration would have passed: two hours of churn, one list each.
it("gives tunnels' age timers one of AGE_SLOTS + 1 durations, so agents gone leave no timer list each", async () => {
  const dir = await mkdtemp(join(tmpdir(), "kas-age-"));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  const { tokensFile } = await writeFixtures(dir);
  const router = await new Router({ defaultTimeoutMs: 1000 }).start();
  cleanup.push(() => router.close(0));
  const maxAgeMs = 7_200_000; // kas's default
  const delays: number[] = [];
  const real = globalThis.setTimeout;
  const spy = vi.spyOn(globalThis, "setTimeout").mockImplementation(((
    fn: (...a: unknown[]) => void,
    ms?: number,
    ...rest: unknown[]
  ) => {
    if (ms !== undefined && ms >= maxAgeMs * 0.9 && ms <= maxAgeMs * 1.1) delays.push(ms);
    return real(fn, ms, ...(rest as []));
  }) as typeof setTimeout);
  cleanup.push(async () => spy.mockRestore());
  const listener = await serveAgents({
    listen: { address: { host: "127.0.0.1", port: 0 } },
    authenticate: createAgentAuthenticate({ authenticator: await loadStaticTokens(tokensFile) }),
    router,
    maxConnectionAgeMs: maxAgeMs,
    tunnel: { keepAliveIntervalMs: 0 },
  });
  cleanup.push(() => listener.close(0));
  const clients = Array.from({ length: 8 }, () => {
    const client = new TunnelClient({
      url: listener.url,
      dial: { headers: { authorization: `Bearer ${TOKEN}` }, proxy: false },
      tunnel: { keepAliveIntervalMs: 0 },
    }).start();
    cleanup.push(() => client.close(0));
    return client;
  });
  await Promise.all(clients.map((c) => c.ready(5000)));
  expect(delays.length).toBeGreaterThanOrEqual(8);
  const grid = new Set(
    Array.from({ length: AGE_SLOTS + 1 }, (_, k) => connectionAgeDelayMs(maxAgeMs, () => k / AGE_SLOTS)),
  );
  for (const d of delays) expect(grid).toContain(d);
});

it("connectionAgeDelayMs: within +-10 % of the age, at most AGE_SLOTS + 1 distinct values", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 60_000, max: 30 * 86_400_000 }),
      fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
        minLength: 1,
        maxLength: 500,
      }),
      (age, draws) => {
        const values = draws.map((r) => connectionAgeDelayMs(age, () => r));
        for (const v of values) {
          expect(v).toBeGreaterThanOrEqual(Math.floor(age * 0.9));
          expect(v).toBeLessThanOrEqual(Math.ceil(age * 1.1));
        }
        const grid = new Set(
          Array.from({ length: 10_001 }, (_, k) => connectionAgeDelayMs(age, () => k / 10_001)),
        );
        expect(grid.size).toBeLessThanOrEqual(AGE_SLOTS + 1);
        for (const v of values) expect(grid).toContain(v);
      },
    ),
    { numRuns: 50 },
  );
});
