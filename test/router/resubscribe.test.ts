// After Redis comes back, a replica may republish its agents before another replica listens again:
// that announcement is missed. The registry says when it listens again ('listening'), which is when
// the router has its waiting callers look again, and by then the missed agent is found by lookup.
import { once } from "node:events";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, test } from "vitest";
import { RedisRegistry, Waiters } from "../../lib/router/index.ts";
import { RedisServer } from "../support/redis-server.ts";
import { until } from "../support/until.ts";

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.stop();
});

const client = () => new Redis({ ...redis.connection, lazyConnect: true, maxRetriesPerRequest: null });

test("an announcement missed while not listening: 'listening' again once resubscribed, and lookup finds the agent", async () => {
  const keyPrefix = "resubscribe:";
  const a = new RedisRegistry({
    commands: client(),
    subscriber: client(),
    keyPrefix,
    replicaId: "a",
    url: "https://a",
  });
  const bSubscriber = client();
  const b = new RedisRegistry({
    commands: client(),
    subscriber: bSubscriber,
    keyPrefix,
    replicaId: "b",
    url: "https://b",
  });
  try {
    const firstListening = once(b, "listening", { signal: AbortSignal.timeout(5000) });
    await Promise.all([a.start(), b.start()]);
    await firstListening;
    const heard: string[] = [];
    b.on("announce", (agentId) => heard.push(agentId));

    const ended = once(bSubscriber, "end", { signal: AbortSignal.timeout(5000) });
    bSubscriber.disconnect(); // b hears nothing now (and does not reconnect by itself)
    await ended;
    a.hold("7");
    await until(async () => (await b.lookup("7")).length === 1, 5000, "a's entry for agent 7 in Redis");
    expect(heard).toEqual([]); // the announcement went by unheard

    const listening = once(b, "listening", { signal: AbortSignal.timeout(5000) });
    await bSubscriber.connect();
    await listening;
    expect((await b.lookup("7")).map((c) => c.replicaId)).toEqual(["a"]);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test("notifyAll wakes the waiters of every key", async () => {
  const w = new Waiters<string>();
  const deadline = Date.now() + 10_000;
  const waits = ["a", "b", "b"].map((k) => w.wait(k, { deadline }, () => new Error("late")));
  expect(w.notifyAll("look again")).toBe(3);
  expect(await Promise.all(waits)).toEqual(["look again", "look again", "look again"]);
  expect(w.count()).toBe(0);
});
