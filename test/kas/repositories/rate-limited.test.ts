// kas's own rate limits toward Gitaly, in front of a counting reader (the decorated thing), with a
// real redis-server for the limits shared by replicas. Rates are high enough for the tests to run
// in about a second; assertions are on counts and order, never on elapsed time.
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  RateLimitedRepositories,
  type RateLimitedRepositoriesOptions,
  type RateLimitScope,
} from "../../../cmd/kas/repositories/rate-limited.ts";
import { DEFAULT_GITALY_RATE_LIMITS, toWindows } from "../../../cmd/kas/repositories/rate-limits.ts";
import type {
  RefSelector,
  RepositoryCallContext,
  RepositoryLocation,
  RepositoryReader,
  TreeFile,
} from "../../../modules/runtime/repositories.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until, within } from "../../support/until.ts";

/** Answers at once and records every call it gets, in order. */
class CountingReader implements RepositoryReader {
  readonly calls: string[] = [];
  closed = false;
  async resolveRef(_: RepositoryLocation, ref: RefSelector, ctx: RepositoryCallContext) {
    const name = "branch" in ref ? ref.branch : "?";
    this.calls.push(`${ctx.agentId}:${name}`);
    return name;
  }
  async readFile(_: RepositoryLocation, commitId: string, path: string): Promise<Buffer> {
    this.calls.push(`readFile:${commitId}:${path}`);
    return Buffer.from(path);
  }
  async readFiles(_: RepositoryLocation, commitId: string, paths: readonly string[]) {
    this.calls.push(`readFiles:${commitId}:${paths.length}`);
    return new Map(paths.map((p) => [p, Buffer.from(p)]));
  }
  async listFiles(_: RepositoryLocation, commitId: string, dir: string): Promise<TreeFile[]> {
    this.calls.push(`listFiles:${commitId}:${dir}`);
    return [{ path: `${dir}/a`, oid: "0".repeat(40) }];
  }
  async close() {
    this.closed = true;
  }
}

const local: RepositoryLocation = { backend: "local", path: "/srv/repo" };
const gitaly = (address: string): RepositoryLocation => ({
  backend: "gitaly",
  gitaly: { address, features: {} },
  repository: {
    storageName: "default",
    relativePath: "r.git",
    glRepository: "project-1",
    glProjectPath: "g/p",
  },
});
// Limits that never get in the way of the one under test.
const wide = { ratePerSecond: 10_000, burst: 10_000 };
const wideAll = { processGlobal: wide, perServer: wide, perAgent: wide, clusterGlobal: wide };

async function deferred(registry: Registry, scope: RateLimitScope): Promise<number> {
  const metric = await registry.getSingleMetric("kas_gitaly_rate_limited_total")!.get();
  return metric.values.find((v) => v.labels.scope === scope)?.value ?? 0;
}
async function outages(registry: Registry): Promise<number> {
  const metric = await registry.getSingleMetric("kas_gitaly_rate_limit_redis_outages_total")!.get();
  return metric.values[0]?.value ?? 0;
}

function limited(opts: Partial<RateLimitedRepositoriesOptions> = {}) {
  const inner = new CountingReader();
  const registry = new Registry();
  const reader = new RateLimitedRepositories(inner, { ...wideAll, registry, ...opts });
  return { inner, registry, reader };
}

const call = (
  reader: RepositoryReader,
  n: number,
  agentId = "1",
  location: RepositoryLocation = local,
  signal?: AbortSignal,
) => reader.resolveRef(location, { branch: `b${n}` }, { agentId, ...(signal && { signal }) });

describe("token buckets as fixed windows", () => {
  it("defaults: the burst at once, then the refill rate", () => {
    expect(toWindows(DEFAULT_GITALY_RATE_LIMITS.processGlobal)).toEqual({
      rate: { points: 30, durationSec: 1 },
      burst: { points: 40, durationSec: 3 },
    });
    expect(toWindows(DEFAULT_GITALY_RATE_LIMITS.perAgent)).toEqual({
      rate: { points: 1, durationSec: 1 },
      burst: { points: 9, durationSec: 10 },
    });
    expect(toWindows({ ratePerSecond: 0.5, burst: 3 })).toEqual({
      rate: { points: 1, durationSec: 2 },
      burst: { points: 2, durationSec: 6 },
    });
    expect(toWindows({ ratePerSecond: 30, burst: 10 })).toEqual({ rate: { points: 10, durationSec: 1 } });
    expect(() => toWindows({ ratePerSecond: 0, burst: 1 })).toThrow(RangeError);
    expect(() => toWindows({ ratePerSecond: 1, burst: 0.5 })).toThrow(RangeError);
  });

  it("any spec: whole points and seconds, exactly `burst` at once, a steady rate no higher than asked", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.01, max: 10_000, noNaN: true }),
        fc.integer({ min: 1, max: 100_000 }),
        (ratePerSecond, burst) => {
          const { rate, burst: extra } = toWindows({ ratePerSecond, burst });
          for (const w of [rate, extra].filter((x) => x !== undefined)) {
            expect(Number.isInteger(w.points) && w.points >= 1).toBe(true);
            expect(Number.isInteger(w.durationSec) && w.durationSec >= 1).toBe(true);
          }
          expect(rate.points + (extra?.points ?? 0)).toBe(burst);
          expect(rate.points / rate.durationSec).toBeLessThanOrEqual(Math.max(ratePerSecond, 1) * (1 + 1e-9));
        },
      ),
    );
  });
});

describe("in-process limits", () => {
  it("process-wide: the burst passes at once, the rest wait and ALL complete, in arrival order", async () => {
    const { inner, registry, reader } = limited({ processGlobal: { ratePerSecond: 5, burst: 10 } });
    const results = Array.from({ length: 15 }, (_, i) => call(reader, i));
    await until(() => inner.calls.length === 10, 5000, "the burst");
    expect(await deferred(registry, "process_global")).toBe(5);
    expect(inner.calls).toEqual(Array.from({ length: 10 }, (_, i) => `1:b${i}`));
    expect(await Promise.all(results)).toEqual(Array.from({ length: 15 }, (_, i) => `b${i}`));
    expect(inner.calls).toEqual(Array.from({ length: 15 }, (_, i) => `1:b${i}`));
    for (const scope of ["process_server", "agent", "cluster_global"] as const) {
      expect(await deferred(registry, scope)).toBe(0);
    }
  });

  it("per Gitaly server: one busy server does not hold up another; every method is limited", async () => {
    const { inner, registry, reader } = limited({ perServer: { ratePerSecond: 4, burst: 4 } });
    const a = gitaly("tcp://gitaly-a:8075");
    const busy = Array.from({ length: 6 }, (_, i) => call(reader, i, "1", a));
    const b = gitaly("tcp://gitaly-b:8075");
    expect(await call(reader, 100, "1", b)).toBe("b100");
    expect(await reader.readFile(b, "c", "f.yaml", 10, { agentId: "1" })).toEqual(Buffer.from("f.yaml"));
    expect(await reader.listFiles(b, "c", "d", { agentId: "1" })).toHaveLength(1);
    expect(await call(reader, 101, "1", local)).toBe("b101");
    expect(await deferred(registry, "process_server")).toBe(2);
    expect(await Promise.all(busy)).toHaveLength(6);
    expect(inner.calls.filter((c) => /^1:b[0-5]$/.test(c))).toEqual([
      "1:b0",
      "1:b1",
      "1:b2",
      "1:b3",
      "1:b4",
      "1:b5",
    ]);
    await reader.close();
    expect(inner.closed).toBe(true);
  });

  it("readFiles takes one token for the whole batch, however many files", async () => {
    const { inner, registry, reader } = limited({ perServer: { ratePerSecond: 1, burst: 2 } });
    const paths = Array.from({ length: 1000 }, (_, i) => `m/${i}.yaml`);
    const files = await reader.readFiles(local, "c", paths, 10, { agentId: "1" });
    expect(files.size).toBe(1000);
    expect(files.get("m/999.yaml")).toEqual(Buffer.from("m/999.yaml"));
    await reader.readFiles(local, "c", paths, 10, { agentId: "1" });
    expect(await deferred(registry, "process_server")).toBe(0);
    // The burst of 2 is spent: the next call waits for a token.
    const third = reader.readFiles(local, "c", ["x.yaml"], 10, { agentId: "1" });
    await until(async () => (await deferred(registry, "process_server")) === 1, 5000, "the third waiting");
    expect((await third).size).toBe(1);
    expect(inner.calls).toEqual(["readFiles:c:1000", "readFiles:c:1000", "readFiles:c:1"]);
  });

  it("abort while waiting rejects with RepositoryError(aborted); the line moves on", async () => {
    const { inner, registry, reader } = limited({ processGlobal: { ratePerSecond: 2, burst: 1 } });
    await call(reader, 0);
    const ac = new AbortController();
    const abandoned = call(reader, 1, "1", local, ac.signal);
    const next = call(reader, 2);
    await until(async () => (await deferred(registry, "process_global")) === 2, 5000, "both waiting");
    ac.abort();
    await expect(abandoned).rejects.toMatchObject({ name: "RepositoryError", code: "aborted" });
    expect(await next).toBe("b2");
    expect(inner.calls).toEqual(["1:b0", "1:b2"]);
    await expect(call(reader, 3, "1", local, AbortSignal.abort())).rejects.toMatchObject({ code: "aborted" });
  });
});

describe("limits shared by replicas (Redis)", () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const connect = async (): Promise<Redis> => {
    const client = new Redis({ ...server.connection, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    client.on("error", () => {}); // outages are what some tests are about
    clients.push(client);
    await until(() => client.status === "ready", 5000, "Redis connected");
    return client;
  };
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server.close();
  });

  it("per agent: two replicas on one Redis share the agent's budget; other agents are not held up", async () => {
    const keyPrefix = `test:${randomUUID()}`;
    const perAgent = { ratePerSecond: 2, burst: 4 };
    const one = limited({ redis: await connect(), keyPrefix, perAgent });
    const two = limited({ redis: await connect(), keyPrefix, perAgent });
    const fromOne = [0, 1, 2].map((i) => call(one.reader, i, "7"));
    const fromTwo = [3, 4, 5].map((i) => call(two.reader, i, "7"));
    const other = await call(two.reader, 6, "8");
    expect(other).toBe("b6");
    await until(() => one.inner.calls.length + two.inner.calls.length >= 5, 5000, "agent 7's burst");
    expect((await deferred(one.registry, "agent")) + (await deferred(two.registry, "agent"))).toBe(2);
    expect(await Promise.all([...fromOne, ...fromTwo])).toEqual(["b0", "b1", "b2", "b3", "b4", "b5"]);
    expect(one.inner.calls.length + two.inner.calls.length).toBe(7);
    // Keys live under the prefix.
    const keys = await clients[0]!.keys(`${keyPrefix}:*`);
    expect(keys.length).toBeGreaterThan(0);
    expect(
      keys.every((k) => k.startsWith(`${keyPrefix}:agent`) || k.startsWith(`${keyPrefix}:cluster`)),
    ).toBe(true);
  });

  it("cluster-wide: all replicas together", async () => {
    const keyPrefix = `test:${randomUUID()}`;
    const clusterGlobal = { ratePerSecond: 3, burst: 5 };
    const one = limited({ redis: await connect(), keyPrefix, clusterGlobal });
    const two = limited({ redis: await connect(), keyPrefix, clusterGlobal });
    const all = [
      ...[0, 1, 2, 3].map((i) => call(one.reader, i, String(i))),
      ...[4, 5, 6].map((i) => call(two.reader, i, String(i))),
    ];
    expect(await Promise.all(all)).toHaveLength(7);
    expect(
      (await deferred(one.registry, "cluster_global")) + (await deferred(two.registry, "cluster_global")),
    ).toBe(2);
    expect(await deferred(one.registry, "agent")).toBe(0);
  });

  it("a Redis that hangs (clients paused) does not hold calls past redisTimeoutMs", async () => {
    const keyPrefix = `test:${randomUUID()}`;
    const admin = await connect();
    const { inner, registry, reader } = limited({ redis: await connect(), keyPrefix, redisTimeoutMs: 200 });
    expect(await call(reader, 0)).toBe("b0");
    await admin.call("CLIENT", "PAUSE", "10000", "WRITE"); // scripts wait, CLIENT UNPAUSE does not
    try {
      // Not held until Redis answers in 10 s: the call goes on once the Redis call times out.
      expect(await within(call(reader, 1), 5000, "a call while Redis hangs")).toBe("b1");
      expect(await outages(registry)).toBe(1);
    } finally {
      await admin.call("CLIENT", "UNPAUSE");
    }
    expect(inner.calls).toEqual(["1:b0", "1:b1"]);
  });

  it("Redis killed: calls go through under the process limits, the outage is logged once; limits return with Redis", async () => {
    const keyPrefix = `test:${randomUUID()}`;
    const lines: { level: string; msg: string }[] = [];
    const log = {
      warn: (_: object, msg: string) => lines.push({ level: "warn", msg }),
      info: (_: object, msg: string) => lines.push({ level: "info", msg }),
    };
    const redis = await connect();
    const { inner, registry, reader } = limited({
      redis,
      keyPrefix,
      log,
      perAgent: { ratePerSecond: 2, burst: 2 },
      processGlobal: { ratePerSecond: 10, burst: 10 },
      redisTimeoutMs: 300,
      redisRetryMs: 100,
    });
    expect(await Promise.all([0, 1].map((i) => call(reader, i)))).toEqual(["b0", "b1"]);

    await server.stop();
    // Far over the agent's limit, and over the process one: none waits for the agent, but the
    // process limit still holds (10 a second: at least 5 of these wait for it), and all complete.
    expect(await Promise.all(Array.from({ length: 15 }, (_, i) => call(reader, 10 + i)))).toHaveLength(15);
    expect(await deferred(registry, "agent")).toBe(0);
    expect(await deferred(registry, "process_global")).toBeGreaterThanOrEqual(5);
    expect(await outages(registry)).toBe(1);
    expect(lines.filter((l) => l.level === "warn")).toHaveLength(1);
    // Still down after the retry period: the next calls try Redis again, and are still not held up.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await Promise.all([call(reader, 25), call(reader, 26)])).toEqual(["b25", "b26"]);
    expect(await outages(registry)).toBe(1);
    expect(lines).toHaveLength(1);

    await server.start();
    await until(() => redis.status === "ready", 5000, "Redis reconnected");
    // After the retry period the next call asks Redis again: the outage ends (one line), the agent limit is back.
    await until(
      async () => {
        await call(reader, 30);
        return lines.some((l) => l.level === "info");
      },
      5000,
      "Redis used again",
    );
    const before = await deferred(registry, "agent");
    expect(await Promise.all(Array.from({ length: 4 }, (_, i) => call(reader, 40 + i)))).toHaveLength(4);
    expect(await deferred(registry, "agent")).toBeGreaterThan(before);
    expect(lines.map((l) => l.level)).toEqual(["warn", "info"]);
    expect(inner.calls.filter((c) => c.startsWith("1:b4"))).toEqual(["1:b40", "1:b41", "1:b42", "1:b43"]);
  });
});
