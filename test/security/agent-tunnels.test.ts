// Issue 23, item 7: one agent token opened a thousand tunnels in seconds. kas now limits, per
// token, the tunnels open at once and the connection attempts per minute, across replicas through
// Redis; refusals are HTTP 429 with Retry-After before the upgrade, agentk waits at least that
// long, a metric counts them, and the token never appears in Redis.
import { createHash } from "node:crypto";
import { once } from "node:events";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { KasConfig } from "../../cmd/kas/config/index.ts";
import { createLogger } from "../../cmd/kas/observability/index.ts";
import {
  dial,
  HandshakeError,
  HandshakeRejection,
  type RetryInfo,
  serveTunnels,
  type TransportConnection,
  TunnelClient,
} from "../../lib/tunnel/index.ts";
import { OTHER_TOKEN, TOKEN } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { startInProcessAgentk } from "../support/agentk-in-process.ts";
import { RedisServer } from "../support/redis-server.ts";
import { within } from "../support/until.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * kas in this process with the given per-token limits; with Redis, a replica of a cluster whose
 * replicas share one private API secret (they must: they authenticate each other with it, and
 * name tokens' counts with it), that of `peer` when given.
 */
async function kasWith(
  limits: { perMinute?: number; tunnels?: number },
  options: Parameters<typeof startInProcessKas>[1] = {},
  peer?: InProcessKas,
): Promise<InProcessKas> {
  const kas = await startInProcessKas((config: KasConfig) => {
    if (limits.perMinute !== undefined) config.agent.listen.connectionsPerTokenPerMinute = limits.perMinute;
    if (limits.tunnels !== undefined) config.agent.listen.maxTunnelsPerToken = limits.tunnels;
    const secretFile = peer?.config.privateApi.listen.authenticationSecretFile;
    if (secretFile !== undefined) config.privateApi.listen.authenticationSecretFile = secretFile;
  }, options);
  cleanups.push(() => kas.close());
  return kas;
}

/** A raw tunnel handshake with `token`: the WebSocket, or the HandshakeError kas answered with. */
async function attempt(kas: InProcessKas, token: string): Promise<TransportConnection> {
  const connection = await dial(kas.addresses.agent, {
    headers: { authorization: `Bearer ${token}` },
    proxy: false,
    handshakeTimeoutMs: 5000,
  });
  cleanups.push(() => connection.destroy());
  return connection;
}

async function refusal(promise: Promise<unknown>): Promise<HandshakeError> {
  const err = await promise.then(
    () => new Error("expected the handshake to be refused"),
    (e: unknown) => e,
  );
  if (!(err instanceof HandshakeError)) throw err;
  return err;
}

async function refusals(kas: InProcessKas, reason: string): Promise<number> {
  const text = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith(`kas_agent_tunnel_limit_refusals_total{reason="${reason}"}`));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
}

/**
 * Per-minute counts start over at each UTC minute: a test that counts to its limit starts early
 * enough in a minute to finish within it. This waits on the clock itself, not on an event.
 */
async function freshMinute(needMs = 5000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

describe("agent tunnels per token (issue 23, item 7)", () => {
  it("refuses a token's tunnels past agent.listen.max_tunnels_per_token with 429, Retry-After and the reason; counts it", async () => {
    const kas = await kasWith({ tunnels: 3 });
    // A burst at once: the slots are taken atomically, so exactly the limit gets through.
    const burst = await Promise.allSettled(Array.from({ length: 10 }, () => attempt(kas, TOKEN)));
    const open = burst.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    expect(open).toHaveLength(3);
    for (const r of burst) {
      if (r.status === "fulfilled") continue;
      expect(r.reason).toBeInstanceOf(HandshakeError);
      const err = r.reason as HandshakeError;
      expect(err.status).toBe(429);
      expect(err.headers["retry-after"]).toBe("30");
      expect(err.body).toMatch(
        /too many tunnels open with this agent token: limit 3 \(agent\.listen\.max_tunnels_per_token\)/,
      );
    }
    expect(await refusals(kas, "max_tunnels_per_token")).toBe(7);
    // Another agent's token is not affected.
    await attempt(kas, OTHER_TOKEN);
    // A closed tunnel frees its slot.
    const removed = once(kas.kas.router!.local, "removed", { signal: AbortSignal.timeout(5000) });
    open[0]!.close();
    await removed;
    await attempt(kas, TOKEN);
    expect((await refusal(attempt(kas, TOKEN))).status).toBe(429);
  });

  it("refuses attempts past agent.listen.connections_per_token_per_minute with 429 and Retry-After until the minute ends; counts it", async () => {
    await freshMinute();
    const kas = await kasWith({ perMinute: 4 });
    // Attempts count whether or not their tunnel stays: each one is closed at once.
    for (let i = 0; i < 4; i++) (await attempt(kas, TOKEN)).close();
    const err = await refusal(attempt(kas, TOKEN));
    expect(err.status).toBe(429);
    expect(err.body).toMatch(
      /too many connection attempts with this agent token: limit 4 per minute \(agent\.listen\.connections_per_token_per_minute\)/,
    );
    const retryAfter = Number(err.headers["retry-after"]);
    const toMinuteEnd = Math.ceil((60_000 - (Date.now() % 60_000)) / 1000);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(toMinuteEnd + 1);
    expect(await refusals(kas, "connections_per_token_per_minute")).toBe(1);
    await attempt(kas, OTHER_TOKEN);
  });

  describe("two kas replicas sharing one Redis", () => {
    let redis: RedisServer;
    let inspect: Redis;
    beforeAll(async () => {
      redis = await RedisServer.start();
      inspect = new Redis({ ...redis.connection, lazyConnect: true });
      await inspect.connect();
    });
    afterAll(async () => {
      inspect.disconnect();
      await redis.stop();
    });
    afterEach(async () => {
      await inspect.flushall();
    });
    const at = () => ({ host: redis.host, port: redis.port });

    it("share the per-minute count and the tunnels count", async () => {
      await freshMinute();
      const a = await kasWith({ perMinute: 4, tunnels: 100 }, { redis: at() });
      const b = await kasWith({ perMinute: 4, tunnels: 100 }, { redis: at() }, a);
      await attempt(a, TOKEN);
      await attempt(b, TOKEN);
      await attempt(a, TOKEN);
      await attempt(b, TOKEN);
      expect((await refusal(attempt(a, TOKEN))).status).toBe(429);
      expect((await refusal(attempt(b, TOKEN))).body).toMatch(/connections_per_token_per_minute/);
      expect(await refusals(a, "connections_per_token_per_minute")).toBe(1);
      expect(await refusals(b, "connections_per_token_per_minute")).toBe(1);

      const c = await kasWith({ perMinute: 100, tunnels: 3 }, { redis: at() });
      const d = await kasWith({ perMinute: 100, tunnels: 3 }, { redis: at() }, c);
      await attempt(c, OTHER_TOKEN);
      await attempt(d, OTHER_TOKEN);
      await attempt(c, OTHER_TOKEN);
      const err = await refusal(attempt(d, OTHER_TOKEN));
      expect(err.status).toBe(429);
      expect(err.body).toMatch(/max_tunnels_per_token/);
    });

    it("never put the token in a Redis key, nor its bare hash", async () => {
      const a = await kasWith({}, { redis: at() });
      await attempt(a, TOKEN);
      const keys = await inspect.keys("*");
      const limitKeys = keys.filter((k) => /agent_limit:|agent_tunnels:/.test(k));
      expect(limitKeys.length).toBeGreaterThanOrEqual(2); // the token's attempts and its tunnels
      const half = TOKEN.slice(0, TOKEN.length / 2);
      // An unkeyed hash could be checked against guesses by whoever reads Redis.
      const bare = [TOKEN, half].map((t) => createHash("sha256").update(t).digest("hex"));
      for (const key of keys) {
        expect(key).not.toContain(TOKEN);
        for (const hash of bare) expect(key).not.toContain(hash);
      }
    });

    it("Redis down: each replica keeps counting on its own (agents still connect, the limit holds per replica)", async () => {
      await freshMinute();
      const lines: string[] = [];
      const log = createLogger({ level: "info", destination: { write: (l: string) => void lines.push(l) } });
      const a = await kasWith({ perMinute: 3 }, { redis: at(), log });
      await redis.stop();
      let err: HandshakeError;
      try {
        for (let i = 0; i < 3; i++) await attempt(a, TOKEN);
        err = await refusal(attempt(a, TOKEN));
      } finally {
        await redis.start();
      }
      expect(err.status).toBe(429);
      const metrics = await (await fetch(`${a.addresses.observability}/metrics`)).text();
      expect(metrics).toMatch(
        /kas_agent_tunnel_limit_redis_fallbacks_total\{limit="connections_per_token_per_minute"\} [1-9]/,
      );
      // The refusal is logged, by the token's fingerprint, never the token.
      expect(lines.some((l) => l.includes("agent tunnel refused: limit reached"))).toBe(true);
      for (const line of lines) expect(line).not.toContain(TOKEN);
    });
  });

  it("agentk waits at least Retry-After after a 429, whatever its own backoff says", async () => {
    const kas = await kasWith({ tunnels: 1 });
    const first = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN });
    cleanups.push(() => first.stop(0));
    await first.agent.client.ready(5000);
    // Its own backoff would wait 50 to 200 ms.
    const second = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      backoff: { initialMs: 50, maxMs: 200 },
    });
    cleanups.push(() => second.stop(0));
    const [info] = (await once(second.agent.client, "retry", { signal: AbortSignal.timeout(5000) })) as [
      RetryInfo,
    ];
    expect(info.reason).toBe("dial");
    expect((info.error as HandshakeError).status).toBe(429);
    expect(info.retryAfterMs).toBe(30_000);
    expect(info.delayMs).toBeGreaterThanOrEqual(30_000);
    // Spread after it, so agents refused together do not come back together.
    expect(info.delayMs).toBeLessThanOrEqual(36_000);
  });

  it("TunnelClient does not dial again before Retry-After has passed", async () => {
    const attempts: number[] = [];
    let second: () => void = () => {};
    const secondAttempt = new Promise<void>((resolve) => {
      second = resolve;
    });
    const server = await serveTunnels({
      host: "127.0.0.1",
      authenticate: () => {
        attempts.push(performance.now());
        if (attempts.length >= 2) second();
        throw new HandshakeRejection(429, "over the limit", { "retry-after": "1" });
      },
      onSession: (s) => s.destroy(),
    });
    cleanups.push(() => server.close(0));
    const client = new TunnelClient({
      url: server.url,
      dial: { proxy: false },
      backoff: { initialMs: 10, maxMs: 20 },
    }).start();
    cleanups.push(() => client.close(0));
    const retries: RetryInfo[] = [];
    client.on("retry", (info) => retries.push(info));
    await within(secondAttempt, 5000, "the second dial");
    expect(attempts[1]! - attempts[0]!).toBeGreaterThanOrEqual(990);
    expect(retries[0]).toMatchObject({ reason: "dial", retryAfterMs: 1000 });
    expect(retries[0]!.delayMs).toBeGreaterThanOrEqual(1000);
  });
});
