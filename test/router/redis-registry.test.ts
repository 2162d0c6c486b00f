// RedisRegistry on its own against one real redis-server (started once for the file): the keys
// it writes and their lifetimes, announcements, lookups that skip expired and dead entries,
// republishing after a failure, and what close leaves behind. Each test has its own key prefix.
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { beforeAll, expect, test } from "vitest";
import {
  DEFAULT_KEY_PREFIX,
  RedisRegistry,
  type RedisRegistryOptions,
  RegistryUnavailableError,
} from "../../lib/router/index.ts";
import { until } from "../support/until.ts";
import { next } from "./harness.ts";
import { prefix, registryFixture, started } from "./redis-registry-support.ts";

const f = registryFixture();
const client = () => f.client();
const registry = f.registry;
let admin: Redis;
beforeAll(() => {
  admin = f.admin();
});

test("defaults: prefix kas:router:, liveness 15 s, agent entries 5 min", async () => {
  const id = randomUUID();
  const r = await started(registry({ replicaId: id }));
  expect(DEFAULT_KEY_PREFIX).toBe("kas:router:");
  const before = Date.now();
  r.hold("1");
  await until(async () => (await admin.exists(`kas:router:agent:1`)) === 1, 5000, "the agent entry");
  expect(await admin.get(`kas:router:replica:${id}`)).toBe(`wss://${id}`);
  expect(await admin.pttl(`kas:router:replica:${id}`)).toBeGreaterThan(14_000);
  expect(await admin.pttl(`kas:router:replica:${id}`)).toBeLessThanOrEqual(15_000);
  expect(await admin.sismember("kas:router:replicas", id)).toBe(1);
  const ttl = await admin.pttl("kas:router:agent:1");
  expect(ttl).toBeGreaterThan(299_000);
  expect(ttl).toBeLessThanOrEqual(300_000);
  const expiry = Number(await admin.hget("kas:router:agent:1", id));
  expect(expiry).toBeGreaterThanOrEqual(before + 300_000);
  expect(expiry).toBeLessThanOrEqual(Date.now() + 300_000);
  await r.close();
  expect(await admin.exists("kas:router:agent:1", `kas:router:replica:${id}`)).toBe(0);
});

test("each refresh interval must be shorter than its TTL", () => {
  const make = (o: Partial<RedisRegistryOptions>) => () =>
    new RedisRegistry({ commands: client(), subscriber: client(), replicaId: "x", url: "u", ...o });
  expect(make({ livenessTtlMs: 100, livenessRefreshMs: 100 })).toThrow(RangeError);
  expect(make({ agentTtlMs: 100, agentRefreshMs: 100 })).toThrow(
    "redis registry: each refresh interval must be shorter than its TTL",
  );
  expect(
    make({ livenessTtlMs: 100, livenessRefreshMs: 99, agentTtlMs: 100, agentRefreshMs: 99 }),
  ).not.toThrow();
  // The defaults derived from a TTL are shorter than it.
  expect(make({ livenessTtlMs: 3, agentTtlMs: 3 })).not.toThrow();
});

test("hold publishes the entry and announces it to the other replicas, not to itself", async () => {
  const keyPrefix = prefix();
  const a = await started(registry({ replicaId: "a", keyPrefix, agentTtlMs: 60_000, livenessTtlMs: 60_000 }));
  const b = await started(registry({ replicaId: "b", keyPrefix }));
  const heardByA: string[] = [];
  a.on("announce", (agentId) => heardByA.push(agentId));
  const heard = next<[string, { replicaId: string; url: string }]>(b, "announce");
  a.hold("7");
  expect(await heard).toEqual(["7", { replicaId: "a", url: "wss://a" }]);
  expect(a.held).toBe(1);
  expect(Number(await admin.hget(`${keyPrefix}agent:7`, "a"))).toBeGreaterThan(Date.now() + 50_000);
  expect(await admin.pttl(`${keyPrefix}agent:7`)).toBeGreaterThan(50_000);
  expect(await admin.pttl(`${keyPrefix}replica:a`)).toBeGreaterThan(50_000);
  expect(await b.lookup("7")).toEqual([{ replicaId: "a", url: "wss://a" }]);
  expect(await a.lookup("7")).toEqual([]); // itself excluded
  expect(heardByA).toEqual([]);
});

test("announcements that are not well-formed, or on another channel, are ignored", async () => {
  const keyPrefix = prefix();
  const b = await started(registry({ replicaId: "b", keyPrefix }));
  const heard: unknown[] = [];
  b.on("announce", (...args) => heard.push(args));
  const channel = `${keyPrefix}announce`;
  for (const m of [
    "not json",
    JSON.stringify({ agentId: 7, replicaId: "a", url: "u" }),
    JSON.stringify({ agentId: "7", replicaId: 1, url: "u" }),
    JSON.stringify({ agentId: "7", replicaId: "a", url: 1 }),
    JSON.stringify({ agentId: "7", replicaId: "b", url: "u" }), // its own
  ])
    await admin.publish(channel, m);
  await admin.publish(channel, JSON.stringify({ agentId: "8", replicaId: "a", url: "u" }));
  await until(() => heard.length > 0, 5000, "the good announcement");
  expect(heard).toEqual([["8", { replicaId: "a", url: "u" }]]);
});

test("lookup: live replicas only; expired entries are skipped and deleted; order varies", async () => {
  const keyPrefix = prefix();
  const b = await started(registry({ replicaId: "b", keyPrefix }));
  const key = `${keyPrefix}agent:9`;
  const now = Date.now();
  const ids = ["r0", "r1", "r2", "r3", "r4", "r5"];
  await admin.hset(key, {
    old: now - 1,
    dead: now + 60_000,
    ...Object.fromEntries(ids.map((id) => [id, now + 60_000])),
  });
  for (const id of ids) await admin.set(`${keyPrefix}replica:${id}`, `wss://${id}`);
  const orders = new Set<string>();
  for (let i = 0; i < 30; i++) {
    const found = await b.lookup("9");
    expect(found.map((c) => c.replicaId).sort()).toEqual(ids);
    expect(found.find((c) => c.replicaId === "r3")!.url).toBe("wss://r3");
    orders.add(found.map((c) => c.replicaId).join());
  }
  expect(orders.size).toBeGreaterThan(1); // shuffled, not always the hash's order
  await until(async () => (await admin.hexists(key, "old")) === 0, 5000, "the expired entry deleted");
  expect(await admin.hexists(key, "dead")).toBe(1); // not expired: its liveness key is what is missing
  await admin.hset(key, { old2: Date.now() });
  expect((await b.lookup("9")).map((c) => c.replicaId)).not.toContain("old2"); // expiring now counts as expired
  expect(await b.lookup("unknown")).toEqual([]);
});

test("release withdraws the entry; releasing what is not held sends nothing", async () => {
  const keyPrefix = prefix();
  const a = await started(registry({ replicaId: "a", keyPrefix }));
  a.hold("5");
  await until(async () => (await admin.hexists(`${keyPrefix}agent:5`, "a")) === 1, 5000, "the entry");
  await admin.hset(`${keyPrefix}agent:6`, "a", Date.now() + 60_000); // written by someone else
  a.release("6");
  a.release("5");
  expect(a.held).toBe(0);
  await until(
    async () => (await admin.hexists(`${keyPrefix}agent:5`, "a")) === 0,
    5000,
    "the entry withdrawn",
  );
  expect(await admin.hexists(`${keyPrefix}agent:6`, "a")).toBe(1);
});

test("describe and described: what each live replica says; gone replicas dropped from the set", async () => {
  const keyPrefix = prefix();
  const a = await started(registry({ replicaId: "a", keyPrefix, livenessTtlMs: 60_000 }));
  expect(await a.described()).toEqual([]); // no descriptions yet
  a.describe("1", "one");
  a.describe("2", "two");
  a.describe("3", undefined); // never described: nothing to withdraw
  await until(async () => (await a.described()).length === 2, 5000, "two descriptions");
  expect(await admin.pttl(`${keyPrefix}info:a`)).toBeGreaterThan(50_000);
  a.describe("1", undefined);
  await until(async () => (await a.described()).length === 1, 5000, "one description");
  expect(await a.described()).toEqual([{ replicaId: "a", agentId: "2", info: "two" }]);
  await admin.sadd(`${keyPrefix}replicas`, "gone");
  await admin.hset(`${keyPrefix}info:gone`, "9", "stale");
  expect(await a.described()).toEqual([{ replicaId: "a", agentId: "2", info: "two" }]);
  await until(
    async () => (await admin.sismember(`${keyPrefix}replicas`, "gone")) === 0,
    5000,
    "gone dropped",
  );
  expect(await admin.sismember(`${keyPrefix}replicas`, "a")).toBe(1);
});

test("before it connects: lookups fail fast, holds and descriptions are kept and published once up", async () => {
  const keyPrefix = prefix();
  const a = registry({ replicaId: "a", keyPrefix });
  expect(a.connected).toBe(false);
  await expect(a.lookup("1")).rejects.toThrow(new RegistryUnavailableError("Redis connection is wait"));
  await expect(a.described()).rejects.toBeInstanceOf(RegistryUnavailableError);
  // Enough to take more than one chunk of 500.
  for (let i = 0; i < 1001; i++) a.hold(String(i));
  for (let i = 0; i < 600; i++) a.describe(String(i), `info ${i}`);
  a.describe("599", undefined);
  a.release("1000");
  const published = next<[number]>(a, "republished");
  const up = next(a, "up");
  await a.start();
  await up;
  expect(a.connected).toBe(true);
  expect(await published).toEqual([1000]);
  const agentKeys = await admin.keys(`${keyPrefix}agent:*`);
  expect(agentKeys).toHaveLength(1000);
  expect(await admin.hlen(`${keyPrefix}info:a`)).toBe(599);
  expect(await admin.pttl(`${keyPrefix}info:a`)).toBeGreaterThan(0);
});

test("entries are refreshed before they expire", async () => {
  const keyPrefix = prefix();
  const a = await started(
    registry({
      replicaId: "a",
      keyPrefix,
      livenessTtlMs: 1000,
      livenessRefreshMs: 100,
      agentTtlMs: 1000,
      agentRefreshMs: 100,
    }),
  );
  a.hold("3");
  a.describe("3", "x");
  const entry = () => admin.hget(`${keyPrefix}agent:3`, "a");
  await until(async () => (await entry()) !== null, 5000, "the entry");
  const first = Number(await entry());
  // Past both TTLs (what is measured is expiry on Redis's clock: there is no event to wait for),
  // everything is still there, and the agent entry's expiry moved on.
  await new Promise((r) => setTimeout(r, 1500));
  expect(await admin.get(`${keyPrefix}replica:a`)).toBe("wss://a");
  expect(await admin.hget(`${keyPrefix}info:a`, "3")).toBe("x");
  expect(Number(await admin.hget(`${keyPrefix}agent:3`, "a"))).toBeGreaterThan(first);
});

test("a failed write is reported and everything is written again once Redis answers", async () => {
  const keyPrefix = prefix();
  const a = await started(registry({ replicaId: "a", keyPrefix, livenessTtlMs: 1000, agentTtlMs: 60_000 }));
  await admin.set(`${keyPrefix}agent:4`, "not a hash");
  const failed = next<[Error]>(a, "error");
  a.hold("4");
  expect((await failed)[0].message).toMatch(/WRONGTYPE/);
  a.hold("5");
  await admin.del(`${keyPrefix}agent:4`);
  // The next tick writes everything again.
  await next(a, "republished");
  expect(await admin.hexists(`${keyPrefix}agent:4`, "a")).toBe(1);
  expect(await admin.hexists(`${keyPrefix}agent:5`, "a")).toBe(1);
});

test("a lost connection: 'down', lookups fail fast, then 'up' and everything written again", async () => {
  const keyPrefix = prefix();
  const commands = client();
  const a = await started(registry({ replicaId: "a", keyPrefix, commands }));
  a.hold("6");
  await until(async () => (await admin.hexists(`${keyPrefix}agent:6`, "a")) === 1, 5000, "the entry");
  const id = await commands.client("ID");
  const down = next(a, "down");
  const up = next(a, "up");
  await admin.del(`${keyPrefix}agent:6`); // as if Redis had lost it
  await admin.client("KILL", "ID", String(id));
  await down;
  await expect(a.lookup("6")).rejects.toBeInstanceOf(RegistryUnavailableError);
  const republished = next<[number]>(a, "republished");
  await up;
  expect(await republished).toEqual([1]);
  expect(await admin.hexists(`${keyPrefix}agent:6`, "a")).toBe(1);
});

test("close: unpublish removes this replica's keys; without it they stay; twice is once; no 'down'", async () => {
  const keyPrefix = prefix();
  const a = await started(registry({ replicaId: "a", keyPrefix, livenessTtlMs: 60_000 }));
  const b = await started(registry({ replicaId: "b", keyPrefix, livenessTtlMs: 60_000 }));
  for (const r of [a, b]) {
    r.hold("1");
    r.describe("1", "x");
  }
  await until(async () => (await admin.hlen(`${keyPrefix}agent:1`)) === 2, 5000, "both entries");
  await until(
    async () => (await admin.exists(`${keyPrefix}info:a`, `${keyPrefix}info:b`)) === 2,
    5000,
    "infos",
  );
  let downs = 0;
  a.on("down", () => downs++);
  await a.close();
  await a.close();
  expect(await admin.hkeys(`${keyPrefix}agent:1`)).toEqual(["b"]);
  expect(await admin.exists(`${keyPrefix}replica:a`, `${keyPrefix}info:a`)).toBe(0);
  expect(await admin.smembers(`${keyPrefix}replicas`)).toEqual(["b"]);
  expect(a.held).toBe(0);
  await b.close({ unpublish: false });
  expect(await admin.hkeys(`${keyPrefix}agent:1`)).toEqual(["b"]);
  expect(await admin.exists(`${keyPrefix}replica:b`, `${keyPrefix}info:b`)).toBe(2);
  await new Promise((r) => setImmediate(r));
  expect(downs).toBe(0);
  expect(a.connected).toBe(false);
});

test("'error' from either connection is passed on", async () => {
  const commands = client();
  const subscriber = client();
  const a = registry({ replicaId: "a", keyPrefix: prefix(), commands, subscriber });
  const errors: Error[] = [];
  a.on("error", (e) => errors.push(e));
  commands.emit("error", new Error("c"));
  subscriber.emit("error", new Error("s"));
  expect(errors.map((e) => e.message)).toEqual(["c", "s"]);
});

test("a command that fails while connected (the connection dropping under it) names Redis in the error", async () => {
  const commands = client();
  const a = await started(registry({ replicaId: "a", keyPrefix: prefix(), commands }));
  // What ioredis answers for a command in flight when the connection drops with retries off.
  const dropped = new Error("Reached the max retries per request limit (which is 0).");
  commands.hgetall = (() => Promise.reject(dropped)) as unknown as typeof commands.hgetall;
  commands.smembers = (() => Promise.reject(dropped)) as unknown as typeof commands.smembers;
  for (const ask of [() => a.lookup("1"), () => a.described()]) {
    const err = await ask().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryUnavailableError);
    expect((err as Error).message).toBe(`tunnel registry unavailable: Redis: ${dropped.message}`);
    expect((err as Error).cause).toBe(dropped);
  }
});
