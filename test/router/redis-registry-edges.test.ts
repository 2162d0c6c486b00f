// RedisRegistry's edges against a real redis-server: what is (not) sent while the connection is not
// up (with the router's clients, which fail a command at once instead of queueing it), Redis
// refusing a subscription or answering with an error, the candidates' order, what a republish
// writes and deletes, and what close leaves connected.
import { randomUUID } from "node:crypto";
import { expect, test, vi } from "vitest";
import { RegistryUnavailableError } from "../../lib/router/index.ts";
import { until } from "../support/until.ts";
import { next } from "./harness.ts";
import { prefix, registryFixture, started } from "./redis-registry-support.ts";

const f = registryFixture();

test("with the router's clients, holds, releases and descriptions before the connection is up send nothing", async () => {
  const keyPrefix = prefix();
  const a = f.registry({
    replicaId: "a",
    keyPrefix,
    commands: await f.routerClient(),
    subscriber: await f.routerClient(),
  });
  const errors: Error[] = [];
  a.on("error", (e) => errors.push(e));
  a.hold("1");
  a.hold("2");
  a.release("2");
  a.describe("1", "one");
  a.describe("2", "two");
  a.describe("2", undefined);
  const published = next<[number]>(a, "republished");
  await a.start();
  // A command sent before 'ready' would have failed ("Stream isn't writeable") and said so.
  expect(await published).toEqual([1]);
  expect(errors).toEqual([]);
  expect(await f.admin().hkeys(`${keyPrefix}agent:1`)).toEqual(["a"]);
  expect(await f.admin().exists(`${keyPrefix}agent:2`)).toBe(0);
  expect(await f.admin().hgetall(`${keyPrefix}info:a`)).toEqual({ 1: "one" });
});

test("an agent held before the connection is up is published, but not announced", async () => {
  const keyPrefix = prefix();
  const b = await started(f.registry({ replicaId: "b", keyPrefix }));
  const heard: string[] = [];
  b.on("announce", (agentId) => heard.push(agentId));
  const a = f.registry({ replicaId: "a", keyPrefix });
  a.hold("early");
  await started(a);
  // Sent after a's writes, on one channel to one subscriber: heard after anything a announced.
  await f
    .admin()
    .publish(`${keyPrefix}announce`, JSON.stringify({ agentId: "marker", replicaId: "m", url: "u" }));
  await until(() => heard.includes("marker"), 5000, "the marker");
  expect(heard).toEqual(["marker"]);
  expect(await b.lookup("early")).toEqual([{ replicaId: "a", url: "wss://a" }]);
});

test("a subscription Redis refuses is reported as 'error'", async () => {
  const user = `sub-${randomUUID()}`;
  await f.admin().acl("SETUSER", user, "on", ">pw", "~*", "+@all", "resetchannels");
  const a = f.registry({
    replicaId: "a",
    keyPrefix: prefix(),
    subscriber: f.client({ username: user, password: "pw" }),
  });
  const failed = next<[Error]>(a, "error");
  await a.start();
  expect((await failed)[0].message).toMatch(/NOPERM/);
});

test("described: no replicas listed is an empty answer; a reply in error is RegistryUnavailableError", async () => {
  const keyPrefix = prefix();
  const admin = f.admin();
  const a = f.registry({ replicaId: "a", keyPrefix });
  await expect(a.described()).rejects.toThrow(new RegistryUnavailableError("Redis connection is wait"));
  await started(a);
  await admin.del(`${keyPrefix}replicas`);
  expect(await a.described()).toEqual([]);
  await admin.sadd(`${keyPrefix}replicas`, "w");
  await admin.set(`${keyPrefix}replica:w`, "wss://w");
  await admin.set(`${keyPrefix}info:w`, "not a hash");
  const err = await a.described().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RegistryUnavailableError);
  expect((err as Error).message).toMatch(/WRONGTYPE/);
  expect(((err as Error).cause as Error).message).toMatch(/WRONGTYPE/);
});

test("lookup: a reply in error is RegistryUnavailableError, with Redis's error as the cause", async () => {
  const keyPrefix = prefix();
  const a = await started(f.registry({ replicaId: "a", keyPrefix }));
  await f.admin().set(`${keyPrefix}agent:1`, "not a hash");
  const err = await a.lookup("1").catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RegistryUnavailableError);
  expect((err as Error).message).toMatch(/WRONGTYPE/);
  expect(((err as Error).cause as Error).message).toMatch(/WRONGTYPE/);
});

test("lookup: an entry expiring at this very millisecond is expired (skipped and deleted), one after it is not", async () => {
  const keyPrefix = prefix();
  const admin = f.admin();
  const b = await started(f.registry({ replicaId: "b", keyPrefix }));
  const at = Date.now() + 60_000;
  const key = `${keyPrefix}agent:1`;
  await admin.hset(key, { edge: at, after: at + 1 });
  await admin.mset(`${keyPrefix}replica:edge`, "wss://edge", `${keyPrefix}replica:after`, "wss://after");
  const now = vi.spyOn(Date, "now").mockReturnValue(at);
  let found: unknown;
  try {
    found = await b.lookup("1");
  } finally {
    now.mockRestore();
  }
  expect(found).toEqual([{ replicaId: "after", url: "wss://after" }]);
  await until(async () => (await admin.hexists(key, "edge")) === 0, 5000, "the expired entry deleted");
  expect(await admin.hexists(key, "after")).toBe(1);
});

test("lookup: two candidates come in either order", async () => {
  const keyPrefix = prefix();
  const admin = f.admin();
  const b = await started(f.registry({ replicaId: "b", keyPrefix }));
  const expiry = Date.now() + 60_000;
  await admin.hset(`${keyPrefix}agent:1`, { x: expiry, y: expiry });
  await admin.mset(`${keyPrefix}replica:x`, "wss://x", `${keyPrefix}replica:y`, "wss://y");
  const orders = new Set<string>();
  for (let i = 0; i < 40; i++) orders.add((await b.lookup("1")).map((c) => c.replicaId).join());
  expect([...orders].sort()).toEqual(["x,y", "y,x"]);
});

test("a republish that fails is reported and tried again until it succeeds", async () => {
  const keyPrefix = prefix();
  const admin = f.admin();
  await admin.set(`${keyPrefix}agent:4`, "not a hash");
  const a = f.registry({ replicaId: "a", keyPrefix, livenessTtlMs: 1000, agentTtlMs: 60_000 });
  a.hold("4");
  a.hold("5");
  const counts: number[] = [];
  a.on("republished", (n) => counts.push(n));
  const failed = next<[Error]>(a, "error");
  await a.start();
  expect((await failed)[0].message).toMatch(/WRONGTYPE/);
  expect(counts).toEqual([]);
  await admin.del(`${keyPrefix}agent:4`);
  await until(() => counts.length > 0, 5000, "a republish");
  expect(counts).toEqual([2]);
  expect(await admin.hexists(`${keyPrefix}agent:4`, "a")).toBe(1);
  expect(await admin.hexists(`${keyPrefix}agent:5`, "a")).toBe(1);
  expect(await admin.get(`${keyPrefix}replica:a`)).toBe("wss://a");
});

test("a republish writes the descriptions from scratch: one Redis kept but this replica withdrew goes", async () => {
  const keyPrefix = prefix();
  const admin = f.admin();
  const commands = f.client();
  const a = await started(f.registry({ replicaId: "a", keyPrefix, commands }));
  a.describe("1", "one");
  await until(async () => (await admin.hget(`${keyPrefix}info:a`, "1")) === "one", 5000, "the description");
  await admin.hset(`${keyPrefix}info:a`, "2", "withdrawn while Redis was away");
  const id = await commands.client("ID");
  const republished = next(a, "republished");
  await admin.client("KILL", "ID", String(id));
  await republished;
  expect(await admin.hgetall(`${keyPrefix}info:a`)).toEqual({ 1: "one" });
});

test("announcements on other channels of a shared subscriber are not taken for the registry's", async () => {
  const keyPrefix = prefix();
  const subscriber = f.client();
  const b = await started(f.registry({ replicaId: "b", keyPrefix, subscriber }));
  const heard: unknown[] = [];
  b.on("announce", (...args) => heard.push(args));
  await subscriber.subscribe(`${keyPrefix}other`);
  const message = (agentId: string) => JSON.stringify({ agentId, replicaId: "a", url: "u" });
  await f.admin().publish(`${keyPrefix}other`, message("7"));
  await f.admin().publish(`${keyPrefix}announce`, message("8"));
  await until(() => heard.length > 0, 5000, "the announcement");
  expect(heard).toEqual([["8", { replicaId: "a", url: "u" }]]);
});

test("close disconnects both connections", async () => {
  const commands = f.client();
  const subscriber = f.client();
  const a = await started(f.registry({ replicaId: "a", keyPrefix: prefix(), commands, subscriber }));
  await a.close();
  await until(() => commands.status === "end" && subscriber.status === "end", 5000, "both ended");
});

test("the refresh tick is a quarter of the shortest refresh interval, within 20 ms and 1 s", async () => {
  const setInterval = vi.spyOn(globalThis, "setInterval");
  const periods: unknown[] = [];
  try {
    for (const o of [
      {},
      { livenessTtlMs: 1000, livenessRefreshMs: 400 },
      { agentTtlMs: 1000, agentRefreshMs: 200 },
      { livenessTtlMs: 100, livenessRefreshMs: 40 },
    ]) {
      const r = f.registry({ replicaId: "t", keyPrefix: prefix(), ...o });
      setInterval.mockClear();
      await started(r);
      periods.push(setInterval.mock.calls.at(0)?.[1]);
      await r.close({ unpublish: false });
    }
  } finally {
    setInterval.mockRestore();
  }
  expect(periods).toEqual([1000, 100, 50, 20]);
});

test("a release or a withdrawn description Redis fails is reported as 'error'", async () => {
  const keyPrefix = prefix();
  const admin = f.admin();
  const a = await started(f.registry({ replicaId: "a", keyPrefix }));
  a.hold("1");
  a.describe("1", "one");
  await until(async () => (await admin.hget(`${keyPrefix}info:a`, "1")) === "one", 5000, "the description");
  await admin.set(`${keyPrefix}agent:1`, "not a hash");
  let failed = next<[Error]>(a, "error");
  a.release("1");
  expect((await failed)[0].message).toMatch(/WRONGTYPE/);
  await admin.set(`${keyPrefix}info:a`, "not a hash");
  failed = next<[Error]>(a, "error");
  a.describe("1", undefined);
  expect((await failed)[0].message).toMatch(/WRONGTYPE/);
});

test("a commands connection already up when given: everything is written on the first tick", async () => {
  const keyPrefix = prefix();
  const commands = f.client();
  await commands.connect();
  const a = f.registry({ replicaId: "a", keyPrefix, commands, livenessTtlMs: 1000 });
  a.hold("1");
  a.describe("1", "one");
  const published = next<[number]>(a, "republished");
  await a.start();
  expect(await published).toEqual([1]);
  expect(await f.admin().hget(`${keyPrefix}info:a`, "1")).toBe("one");
});

test("a republish reports a failure in any chunk, not only the first", async () => {
  const keyPrefix = prefix();
  await f.admin().set(`${keyPrefix}agent:500`, "not a hash"); // the first of the second chunk of 500
  const a = f.registry({ replicaId: "a", keyPrefix });
  for (let i = 0; i <= 500; i++) a.hold(String(i));
  const first = new Promise<string>((resolve) => {
    a.once("error", (e) => resolve(e.message));
    a.once("republished", (n) => resolve(`republished ${n}`));
  });
  await a.start();
  expect(await first).toMatch(/WRONGTYPE/);
});
