// The hub over both stores (memory; a real redis-server shared by two replicas): an update older
// than what is kept never overwrites it, subscribers get a snapshot then changes, a resume gets
// only what it missed, presence follows the owning stream, and a change applied at one replica
// reaches a subscriber at the other.
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { InProcessBroadcast, RedisBroadcast } from "../../../../cmd/kas/shared/broadcast.ts";
import { Hub } from "../../../../modules/cluster_views/kas/hub.ts";
import { createClusterViewsMetrics } from "../../../../modules/cluster_views/kas/metrics.ts";
import {
  MemoryViewsStore,
  RedisViewsStore,
  type ViewsStore,
} from "../../../../modules/cluster_views/kas/store.ts";
import type { ClusterViews, ViewEvent } from "../../../../modules/cluster_views/views.ts";
import type { Broadcast } from "../../../../modules/runtime/index.ts";
import { silentLogger } from "../../../kas/support/fixtures.ts";
import { RedisServer } from "../../../support/redis-server.ts";
import { until } from "../../../support/until.ts";

const TIMES = { presenceTtlMs: 60_000, retainMs: 60_000 };
const nodes = (total: number): ClusterViews => ({
  nodes: {
    total,
    ready: total,
    capacity: { cpuMillis: 1000 * total, memoryBytes: 2 ** 30 * total },
    allocatable: { cpuMillis: 900 * total, memoryBytes: 2 ** 29 * total },
  },
});
const pods = (running: number): ClusterViews => ({
  pods: {
    namespaces: {
      default: { phases: { Pending: 0, Running: running, Succeeded: 0, Failed: 0, Unknown: 0 }, restarts: 0 },
    },
  },
});

function hubOver(store: ViewsStore, broadcast: Broadcast): Hub {
  const hub = new Hub({
    store,
    broadcast,
    log: silentLogger(),
    metrics: createClusterViewsMetrics(new Registry()),
  });
  hub.start();
  return hub;
}

function collect(hub: Hub, filter: { agentId?: string; lastEventId?: string } = {}) {
  const events: ViewEvent[] = [];
  const drops: string[] = [];
  const off = hub.subscribe(
    filter,
    (e) => events.push(e),
    (r) => drops.push(r),
  );
  return { events, drops, off };
}

let redis: RedisServer;
const clients: Redis[] = [];
const connect = () => {
  const c = new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: 1 });
  c.on("error", () => {});
  clients.push(c);
  return c;
};
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await redis.close();
});

const stores: [string, () => ViewsStore][] = [
  ["memory", () => new MemoryViewsStore(TIMES)],
  ["redis", () => new RedisViewsStore({ client: connect(), keyPrefix: `t${Math.random()}:` }, TIMES)],
];

describe.each(stores)("hub over the %s store", (_, makeStore) => {
  test("an older seq never overwrites a newer one; changes replace only their views", async () => {
    const hub = hubOver(makeStore(), new InProcessBroadcast());
    expect(await hub.update("7", "s1", { seq: 10, snapshot: true, views: { ...nodes(3), ...pods(5) } })).toBe(
      true,
    );
    expect(await hub.update("7", "s1", { seq: 12, snapshot: false, views: pods(6) })).toBe(true);
    // Late (seq 11) and equal (seq 12): both refused, from any stream.
    expect(await hub.update("7", "s1", { seq: 11, snapshot: false, views: pods(1) })).toBe(false);
    expect(await hub.update("7", "s2", { seq: 12, snapshot: true, views: nodes(1) })).toBe(false);
    const current = await hub.current("7");
    expect(current).toMatchObject({
      agentId: "7",
      seq: 12,
      connected: true,
      views: { ...nodes(3), ...pods(6) },
    });
    // A newer snapshot removes the views it does not hold.
    expect(await hub.update("7", "s1", { seq: 13, snapshot: true, views: nodes(4) })).toBe(true);
    expect((await hub.current("7"))?.views).toEqual(nodes(4));
    expect((await hub.list()).map((a) => a.agentId)).toEqual(["7"]);
    expect(await hub.current("8")).toBeUndefined();
  });

  test("a subscriber gets a snapshot, then changes; a resume gets only what it missed", async () => {
    const hub = hubOver(makeStore(), new InProcessBroadcast());
    await hub.update("7", "s1", { seq: 1, snapshot: true, views: nodes(1) });
    const sub = collect(hub, { agentId: "7" });
    await until(() => sub.events.length === 1, 2000, "the snapshot");
    expect(sub.events[0]).toMatchObject({ type: "snapshot", id: "7:1", agent: { views: nodes(1) } });
    await hub.update("7", "s1", { seq: 2, snapshot: false, views: pods(1) });
    await hub.update("7", "s1", { seq: 3, snapshot: false, views: pods(2) });
    await hub.update("8", "s9", { seq: 1, snapshot: true, views: nodes(9) }); // another agent: not for sub
    expect(sub.events.map((e) => e.id)).toEqual(["7:1", "7:2", "7:3"]);
    expect(sub.events[2]).toMatchObject({ type: "change", seq: 3, views: pods(2) });
    sub.off();

    const resumed = collect(hub, { agentId: "7", lastEventId: "7:2" });
    await until(() => resumed.events.length === 1, 2000, "the missed change");
    expect(resumed.events[0]).toMatchObject({ type: "change", id: "7:3" });
    // An id kas no longer has (or never had): a fresh snapshot instead.
    const unknown = collect(hub, { agentId: "7", lastEventId: "7:0" });
    await until(() => unknown.events.length === 1, 2000, "a snapshot");
    expect(unknown.events[0]).toMatchObject({ type: "snapshot", id: "7:3" });
    const all = collect(hub);
    await until(() => all.events.length === 2, 2000, "a snapshot of each agent");
    expect(all.events.map((e) => e.id).sort()).toEqual(["7:3", "8:1"]);
  });

  test("a resume replays the very events a live subscriber got (kept as their JSON)", async () => {
    const hub = hubOver(makeStore(), new InProcessBroadcast());
    const live = collect(hub, { agentId: "9" });
    await hub.update("9", "s1", { seq: 1, snapshot: true, views: { ...nodes(2), ...pods(3) } });
    await hub.update("9", "s1", { seq: 2, snapshot: false, views: pods(4) });
    await hub.update("9", "s1", { seq: 3, snapshot: false, views: nodes(5) });
    await hub.disconnected("9", "s1");
    await until(() => live.events.length === 5, 2000, "connected, snapshot, two changes, disconnected");
    const resumed = collect(hub, { agentId: "9", lastEventId: "9:1" });
    await until(() => resumed.events.length === 3, 2000, "what followed 9:1");
    expect(resumed.events).toEqual(live.events.slice(2));
    expect(resumed.events.map((e) => e.type)).toEqual(["change", "change", "disconnected"]);
  });

  test("a snapshot starts the history again: a resume from before it gets a fresh snapshot, from it what followed", async () => {
    const hub = hubOver(makeStore(), new InProcessBroadcast());
    const live = collect(hub, { agentId: "9" });
    await hub.update("9", "s1", { seq: 1, snapshot: true, views: nodes(1) });
    await hub.update("9", "s1", { seq: 2, snapshot: false, views: pods(2) });
    await hub.update("9", "s1", { seq: 3, snapshot: true, views: nodes(3) });
    await hub.update("9", "s1", { seq: 4, snapshot: false, views: pods(4) });
    await until(() => live.events.length === 5, 2000, "connected, snapshot, change, snapshot, change");
    const fromSnapshot = collect(hub, { agentId: "9", lastEventId: "9:3" });
    await until(() => fromSnapshot.events.length === 1, 2000, "the change after the snapshot");
    expect(fromSnapshot.events).toEqual([live.events[4]]);
    const beforeIt = collect(hub, { agentId: "9", lastEventId: "9:2" });
    await until(() => beforeIt.events.length === 1, 2000, "a fresh snapshot");
    expect(beforeIt.events[0]).toMatchObject({
      type: "snapshot",
      id: "9:4",
      agent: { views: { ...nodes(3), ...pods(4) } },
    });
  });

  test("presence follows the stream that last wrote: another stream's end does not disconnect", async () => {
    const hub = hubOver(makeStore(), new InProcessBroadcast());
    const sub = collect(hub, { agentId: "7" });
    await hub.update("7", "old", { seq: 1, snapshot: true, views: nodes(1) });
    await hub.update("7", "new", { seq: 2, snapshot: true, views: nodes(2) });
    await hub.disconnected("7", "old");
    expect((await hub.current("7"))?.connected).toBe(true);
    await hub.disconnected("7", "new");
    expect((await hub.current("7"))?.connected).toBe(false);
    expect(sub.events.map((e) => e.type)).toEqual([
      "connected",
      "snapshot",
      "connected",
      "snapshot",
      "disconnected",
    ]);
  });

  test("close cuts every subscriber with the reason", async () => {
    const hub = hubOver(makeStore(), new InProcessBroadcast());
    const sub = collect(hub);
    hub.close("kas is shutting down");
    expect(sub.drops).toEqual(["kas is shutting down"]);
    expect(hub.subscribers).toBe(0);
  });
});

test("a change applied at replica A reaches a subscriber at replica B (Redis store and pub/sub)", async () => {
  const keyPrefix = "replicas:";
  const replica = () =>
    hubOver(
      new RedisViewsStore({ client: connect(), keyPrefix }, TIMES),
      new RedisBroadcast(connect(), connect(), `${keyPrefix}broadcast:`),
    );
  const a = replica();
  const b = replica();
  await a.update("5", "s", { seq: 100, snapshot: true, views: nodes(2) });
  const atB = collect(b, { agentId: "5" });
  await until(() => atB.events.length === 1, 5000, "B's snapshot from Redis");
  expect(atB.events[0]).toMatchObject({ type: "snapshot", agent: { seq: 100, views: nodes(2) } });
  // B's subscription is up once Redis confirms it: wait for that before publishing.
  await until(
    async () => (await clients[0]!.pubsub("NUMSUB", `${keyPrefix}broadcast:cluster_views`))[1] === 2,
  );
  await a.update("5", "s", { seq: 101, snapshot: false, views: nodes(3) });
  await until(() => atB.events.length === 2, 5000, "the change at B");
  expect(atB.events[1]).toMatchObject({ type: "change", seq: 101, views: nodes(3) });
  // B's view of the store is A's write.
  expect((await b.current("5"))?.views).toEqual(nodes(3));
});
