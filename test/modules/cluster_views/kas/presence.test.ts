// One refresher for every open views stream: each stream refreshed once a period at its own time,
// those due at a tick together (over Redis: one pipeline, not a round trip each); the views of a
// stream that is open outlive their TTL, those of one that is gone expire; Redis down then back,
// the refreshes go on.
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { type OpenStream, PresenceRefresher } from "../../../../modules/cluster_views/kas/presence.ts";
import { RedisViewsStore } from "../../../../modules/cluster_views/kas/store.ts";
import type { ClusterViews } from "../../../../modules/cluster_views/views.ts";
import { recordPipelines } from "../../../support/redis-pipelines.ts";
import { RedisServer } from "../../../support/redis-server.ts";
import { until } from "../../../support/until.ts";

const owners = (n: number, prefix = "owner") =>
  Array.from({ length: n }, (_, i) => [String(i + 1), `${prefix}-${crypto.randomUUID()}`] as const);

const refreshers: PresenceRefresher[] = [];
const refresher = (o: ConstructorParameters<typeof PresenceRefresher>[0]) => {
  const r = new PresenceRefresher(o);
  refreshers.push(r);
  return r;
};
afterEach(() => {
  for (const r of refreshers.splice(0)) r.close();
});

describe("PresenceRefresher", () => {
  /** What each refresh call carried, and when. */
  const recorder = () => {
    const calls: { at: number; due: OpenStream[] }[] = [];
    const counts = new Map<string, number>();
    const refresh = async (due: OpenStream[]) => {
      calls.push({ at: performance.now(), due });
      for (const [, owner] of due) counts.set(owner, (counts.get(owner) ?? 0) + 1);
    };
    return { calls, counts, refresh };
  };

  test("refreshes each stream once a period, at its own time, those due at a tick in one call; a removed one no more", async () => {
    const { calls, counts, refresh } = recorder();
    const r = refresher({ periodMs: 200, refresh }); // ticks of 20 ms: 10 slots
    const streams = owners(1000);
    for (const [agentId, owner] of streams) r.add(agentId, owner);
    expect(r.size).toBe(1000);
    r.start();
    await until(() => counts.size === 1000, 5000, "every stream refreshed once");
    // 1,000 streams in about 10 calls (one per slot), not 1,000.
    expect(calls.length).toBeLessThanOrEqual(12);
    expect(Math.max(...calls.map((c) => c.due.length))).toBeGreaterThan(50);
    // Spread over the period, not in one burst.
    const times = calls.map((c) => c.at);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThan(100);
    expect(new Set(times.map((t) => Math.floor(t / 20))).size).toBeGreaterThan(4);

    const removed = streams.slice(0, 500);
    for (const [, owner] of removed) r.remove(owner);
    expect(r.size).toBe(500);
    const at = new Map(removed.map(([, owner]) => [owner, counts.get(owner)]));
    const kept = streams.slice(500);
    const base = new Map(kept.map(([, owner]) => [owner, counts.get(owner)!]));
    await until(
      () => kept.every(([, owner]) => counts.get(owner)! >= base.get(owner)! + 2),
      5000,
      "two more refreshes of each open stream",
    );
    // Once a period: two periods later, two or three refreshes more, not one per tick.
    for (const [, owner] of kept) expect(counts.get(owner)! - base.get(owner)!).toBeLessThanOrEqual(3);
    for (const [, owner] of removed) expect(counts.get(owner)).toBe(at.get(owner));
  });

  test("after the event loop was held for periods, each stream is refreshed once, not once per missed tick", async () => {
    const { calls, refresh } = recorder();
    const r = refresher({ periodMs: 100, refresh });
    for (const [agentId, owner] of owners(200)) r.add(agentId, owner);
    r.start();
    await until(() => calls.length > 0, 5000, "a first refresh");
    const blockedUntil = performance.now() + 350;
    while (performance.now() < blockedUntil) {} // a busy event loop: 3.5 periods of ticks missed
    const before = calls.length;
    await until(() => calls.length > before, 5000, "the tick after the block");
    const late = calls[before]!.due.map(([, owner]) => owner);
    expect(late).toHaveLength(200);
    expect(new Set(late).size).toBe(200);
  });

  test("a failing refresh is told once, and again only after one succeeded", async () => {
    let failing = true;
    let tries = 0;
    const told: string[] = [];
    const r = refresher({
      periodMs: 100,
      refresh: async () => {
        tries++;
        if (failing) throw new Error("Redis is down");
      },
      onFailing: (err) => told.push(err.message),
    });
    for (const [agentId, owner] of owners(50)) r.add(agentId, owner);
    r.start();
    await until(() => tries >= 10, 5000, "ten failed refreshes");
    expect(told).toEqual(["Redis is down"]);
    failing = false;
    const ok = tries;
    await until(() => tries > ok + 1, 5000, "a refresh that succeeds");
    failing = true;
    const again = tries;
    await until(() => tries > again + 1, 5000, "failing again");
    expect(told).toEqual(["Redis is down", "Redis is down"]);
  });
});

describe("PresenceRefresher over the Redis store", () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server.stop();
  });

  const TTL = 300; // refreshed every 100 ms
  const views: ClusterViews = { warnings: { latest: [] } };
  /** A store as kas has it (no offline queue: with Redis down a command fails at once). */
  const storeOf = async () => {
    const client = await server.client();
    clients.push(client);
    const keyPrefix = `p${Math.random()}:`;
    const store = new RedisViewsStore({ client, keyPrefix }, { presenceTtlMs: TTL, retainMs: TTL });
    const exists = async (agentId: string) =>
      (await client.exists(`${keyPrefix}cluster_views:${agentId}`)) === 1;
    return { client, store, exists };
  };
  const connect = async (store: RedisViewsStore, streams: readonly OpenStream[]) => {
    for (const [agentId, owner] of streams)
      await store.apply(agentId, owner, { seq: 1, snapshot: true, views }, new Date().toISOString());
  };

  test("open streams' views outlive their TTL, in one pipeline per tick; a removed stream's expire", async () => {
    const { client, store, exists } = await storeOf();
    const { sent } = recordPipelines(client);
    const streams = owners(400);
    await connect(store, streams);
    const r = refresher({ periodMs: TTL / 3, refresh: (due) => store.refresh(due) });
    const [held, gone] = [streams.slice(0, 200), streams.slice(200)];
    for (const [agentId, owner] of held) r.add(agentId, owner);
    r.start();
    // The streams never added (their replica died) expire after their TTL; the others, written at
    // the same moment, are still there.
    await until(
      async () => (await Promise.all(gone.map(([id]) => exists(id)))).every((e) => !e),
      5000,
      "the views of the streams not refreshed to expire",
    );
    expect((await Promise.all(held.map(([id]) => exists(id)))).every((e) => e)).toBe(true);
    // 200 streams refreshed several times over, in a pipeline per tick carrying many of them.
    expect(sent.reduce((n, p) => n + p.commands, 0)).toBeGreaterThanOrEqual(400);
    expect(Math.max(...sent.map((p) => p.commands))).toBeGreaterThan(20);
    // Streams closed: their views expire too.
    for (const [, owner] of held) r.remove(owner);
    await until(
      async () => (await Promise.all(held.map(([id]) => exists(id)))).every((e) => !e),
      5000,
      "the views of the closed streams to expire",
    );
  });

  test("Redis down then back: refreshing goes on, the views written again live past their TTL", async () => {
    const { client, store, exists } = await storeOf();
    const told: Error[] = [];
    const streams = owners(50);
    await connect(store, streams);
    // Each stream's refreshes that Redis took.
    const refreshed = new Map<string, number>();
    const r = refresher({
      periodMs: TTL / 3,
      refresh: async (due) => {
        await store.refresh(due);
        for (const [, owner] of due) refreshed.set(owner, (refreshed.get(owner) ?? 0) + 1);
      },
      onFailing: (err) => told.push(err),
    });
    for (const [agentId, owner] of streams) r.add(agentId, owner);
    r.start();
    await server.stop();
    await until(() => told.length === 1, 5000, "the refresher to see Redis down");
    await server.start(); // empty: the agents' next updates write their views again
    await until(() => client.status === "ready", 5000, "the client back");
    await connect(store, streams);
    refreshed.clear();
    // Five refreshes of each since written: four periods or more, past the TTL (three).
    await until(
      () => streams.every(([, owner]) => (refreshed.get(owner) ?? 0) >= 5),
      5000,
      "five refreshes of each stream",
    );
    expect((await Promise.all(streams.map(([id]) => exists(id)))).every((e) => e)).toBe(true);
    expect(told).toHaveLength(1);
  });
});
