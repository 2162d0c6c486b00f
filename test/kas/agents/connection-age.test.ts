import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it, vi } from "vitest";
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
