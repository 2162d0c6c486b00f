// Each agent's history, in memory and in a real redis-server: one sample per bucket within the
// window, changes bounded and kept once however many replicas write them.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Change, Sample } from "../../../modules/dashboard/api.ts";
import {
  HISTORY_LIMITS,
  type HistoryStore,
  MemoryHistoryStore,
  RedisHistoryStore,
} from "../../../modules/dashboard/kas/history-store.ts";
import { RedisServer } from "../../support/redis-server.ts";

const { bucketMs, windowMs, changes: MAX_CHANGES } = HISTORY_LIMITS;
const T0 = 1_800_000_000_000;
const sample = (t: number, nodesReady: number): Sample => ({
  t,
  nodesReady,
  nodesTotal: 3,
  pods: { Pending: 0, Running: 1, Succeeded: 0, Failed: 0, Unknown: 0 },
  restarts: 0,
  warnings: 0,
  rollouts: 0,
});
const change = (i: number, agentId = "1"): Change => ({
  agentId,
  at: new Date(T0 + i * 1000).toISOString(),
  kind: "scaled",
  object: "Deployment shop/cart",
  text: `scaled ${i}`,
});

/** The same rules, whichever store. */
function behaves(name: string, make: (now: () => number) => HistoryStore) {
  describe(name, () => {
    test("one sample per bucket (the newest), none older than the window", async () => {
      let now = T0;
      const store = make(() => now);
      await store.sample("1", sample(T0, 3));
      await store.sample("1", sample(T0, 2)); // same bucket: replaced
      await store.sample("1", sample(T0 + bucketMs, 1));
      expect((await store.history("1")).samples.map((s) => s.nodesReady)).toEqual([2, 1]);
      now = T0 + windowMs + 1;
      await store.sample("1", sample(now - (now % bucketMs), 3));
      expect((await store.history("1")).samples.map((s) => s.nodesReady)).toEqual([1, 3]);
    });

    test("changes: newest first, each once, at most the bound; the feed merges agents", async () => {
      const store = make(() => T0);
      const all = Array.from({ length: MAX_CHANGES + 10 }, (_, i) => change(i, "2"));
      await store.changes("2", all.slice(0, 50));
      await store.changes("2", all); // a second replica writing the same changes
      const kept = (await store.history("2")).changes;
      expect(kept).toHaveLength(MAX_CHANGES);
      expect(kept[0]).toEqual(all.at(-1));
      expect(kept.at(-1)).toEqual(all[10]);
      await store.changes("3", [change(MAX_CHANGES + 20, "3")]);
      const feed = await store.latestChanges(["2", "3"], 3);
      expect(feed.map((c) => [c.agentId, c.text])).toEqual([
        ["3", `scaled ${MAX_CHANGES + 20}`],
        ["2", `scaled ${MAX_CHANGES + 9}`],
        ["2", `scaled ${MAX_CHANGES + 8}`],
      ]);
      expect(await store.latestChanges(["404"], 3)).toEqual([]);
    });
  });
}

behaves("in memory", (now) => new MemoryHistoryStore(now));

let redis: RedisServer;
let client: Redis;
let n = 0;
beforeAll(async () => {
  redis = await RedisServer.start();
  client = new Redis({ ...redis.connection, lazyConnect: true });
  await client.connect();
});
afterAll(async () => {
  client?.disconnect();
  await redis?.close();
});
behaves("in Redis", (now) => new RedisHistoryStore({ client, keyPrefix: `h${++n}:` }, now));

test("in Redis: the keys expire a window after the last write", async () => {
  const store = new RedisHistoryStore({ client, keyPrefix: "ttl:" }, () => Date.now());
  await store.sample("1", sample(Date.now(), 3));
  await store.changes("1", [change(1)]);
  for (const key of ["ttl:dashboard:samples:1", "ttl:dashboard:changes:1"]) {
    const ttl = await client.pttl(key);
    expect(ttl).toBeGreaterThan(windowMs - 60_000);
    expect(ttl).toBeLessThanOrEqual(windowMs);
  }
});
