// The per-token tunnel count shared through Redis (kas's max_tunnels_per_token): exact across
// replicas reserving at once, and freed by itself when a replica dies or a handshake never ends.
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type TunnelSlot, TunnelSlots } from "../../../cmd/kas/agents/limits/slots.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";

describe("TunnelSlots through a real Redis", () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const replicas: TunnelSlots[] = [];
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterEach(async () => {
    for (const r of replicas.splice(0)) r.close();
    await clients[0]?.flushall();
    for (const c of clients.splice(0)) c.disconnect();
  });
  afterAll(async () => {
    await server.stop();
  });

  /** One kas replica's count: a connection of its own, as each replica has. */
  const replica = async (limit: number, ttls: { liveTtlMs?: number; pendingTtlMs?: number } = {}) => {
    const client = new Redis({ ...server.connection, lazyConnect: true, enableOfflineQueue: false });
    await client.connect();
    clients.push(client);
    const slots = new TunnelSlots({ limit, redis: { client, keyPrefix: "t:" }, ...ttls });
    replicas.push(slots);
    return slots;
  };

  it("lets exactly the limit through when replicas reserve at the same moment", async () => {
    const [a, b] = [await replica(3), await replica(3)];
    const verdicts = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).reserve("k")));
    expect(verdicts.filter((v) => v.slot)).toHaveLength(3);
    // Another token has slots of its own.
    expect((await a.reserve("other")).slot).toBeDefined();
  });

  it("frees a released slot at once, a dead replica's when their TTL passes, an unclaimed one by itself", async () => {
    const a = await replica(1, { liveTtlMs: 300, pendingTtlMs: 300 });
    const b = await replica(1, { liveTtlMs: 300, pendingTtlMs: 300 });
    const held = (await a.reserve("k")).slot!;
    held.claim();
    expect((await b.reserve("k")).slot).toBeUndefined();
    held.release();
    expect((await b.reserve("k")).slot).toBeDefined();
    // b never claims it (its handshake died after authentication): it frees itself.
    let mine: TunnelSlot | undefined;
    const take = async () => {
      mine = (await a.reserve("k")).slot;
      return mine !== undefined;
    };
    await until(take, 5000, "the unclaimed slot to expire");
    // a's tunnel is up, then a dies (no refresh, no release): its slot expires in Redis.
    mine!.claim();
    a.close();
    expect((await b.reserve("k")).slot).toBeUndefined();
    await until(
      async () => (await b.reserve("k")).slot !== undefined,
      5000,
      "the dead replica's slot to expire",
    );
  });

  it("refreshes held slots, so a live tunnel keeps its slot past the TTL", async () => {
    const a = await replica(1, { liveTtlMs: 300 });
    const b = await replica(1, { liveTtlMs: 300 });
    a.start();
    const held = (await a.reserve("k")).slot!;
    held.claim();
    const key = "t:agent_tunnels:k";
    // Past several TTLs, the entry is still there: refreshed every third of the TTL.
    const first = Number(await clients[0]!.zscore(key, (await clients[0]!.zrange(key, 0, 0))[0]!));
    await until(
      async () =>
        Number(await clients[0]!.zscore(key, (await clients[0]!.zrange(key, 0, 0))[0]!)) > first + 600,
      5000,
      "two refreshes or more",
    );
    expect((await b.reserve("k")).slot).toBeUndefined();
  });

  it("refreshes each token at its own time in the period, not every token in one burst", async () => {
    const a = await replica(100, { liveTtlMs: 600 }); // a refresh every 200 ms, ticks of 20 ms
    const tokens = 40;
    for (let i = 0; i < tokens; i++) (await a.reserve(`k${i}`)).slot!.claim();
    // Each rewrite of held entries is one MULTI: when each came, by token.
    const client = clients[0]!;
    const multi = client.multi.bind(client);
    const rewrites: number[] = [];
    client.multi = ((...args: Parameters<typeof multi>) => {
      rewrites.push(performance.now());
      return multi(...args);
    }) as typeof client.multi;
    a.start();
    await until(() => rewrites.length >= tokens, 5000, "every token rewritten once");
    const first = rewrites.slice(0, tokens);
    const spreadMs = Math.max(...first) - Math.min(...first);
    // All at once, they would come within a millisecond or two of each other.
    expect(spreadMs).toBeGreaterThan(100);
    expect(new Set(first.map((t) => Math.floor(t / 20))).size).toBeGreaterThan(4);
  });
});
