// Many small writes to a real Redis as few round trips: a defined script in pipelines of a bounded
// size, run again after Redis restarted (it no longer knows the script), failures answered, not thrown.
import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, test } from "vitest";
import { inPipelines, redisScript } from "../../../modules/runtime/index.ts";
import { recordPipelines } from "../../support/redis-pipelines.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";

let server: RedisServer;
let client: Redis;
beforeAll(async () => {
  server = await RedisServer.start();
  client = await server.client();
});
afterAll(async () => {
  client.disconnect();
  await server.stop();
});

const SET_WITH_TTL = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('PEXPIRE', KEYS[1], ARGV[2]); return 0";

/** Calls of `name` Redis served (INFO commandstats). */
const calls = async (name: string) =>
  Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(await client.info("commandstats"))?.[1] ?? 0);

test("sends items in pipelines of the chunk's size, each item's script run once, by its SHA", async () => {
  const setWithTtl = redisScript(client, "testSetWithTtl", SET_WITH_TTL);
  const recorded = recordPipelines(client);
  await client.config("RESETSTAT");
  const items = Array.from({ length: 1200 }, (_, i) => i);
  const err = await inPipelines(
    client,
    items,
    (p, i) => setWithTtl(p, [`batch:${i}`], [`v${i}`, 60_000]),
    500,
  );
  recorded.stop();
  expect(err).toBeUndefined();
  expect(recorded.sent.map((p) => p.commands)).toEqual([500, 500, 200]);
  expect(await client.get("batch:1199")).toBe("v1199");
  expect(await client.pttl("batch:0")).toBeGreaterThan(0);
  // The script's text went once (EVAL, on this connection's first run), then its SHA.
  expect(await calls("eval")).toBe(1);
  expect(await calls("evalsha")).toBe(1199);
});

test("runs its script again after Redis restarted without it; a failure is answered, not thrown", async () => {
  const setWithTtl = redisScript(client, "testSetWithTtl", SET_WITH_TTL);
  const write = (value: string) =>
    inPipelines(client, [1, 2, 3], (p, i) => setWithTtl(p, [`r:${i}`], [value, 60_000]));
  expect(await write("a")).toBeUndefined();
  await server.stop();
  await until(() => client.status !== "ready", 5000, "the client to see Redis gone");
  expect(await write("b")).toBeInstanceOf(Error);
  await server.start();
  await until(() => client.status === "ready", 5000, "the client back");
  expect(await write("c")).toBeUndefined();
  expect(await client.mget("r:1", "r:2", "r:3")).toEqual(["c", "c", "c"]);
});
