// The per-token tunnel count shared through Redis (kas's max_tunnels_per_token): exact across
// replicas reserving at once, and freed by itself when a replica dies or a handshake never ends.
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type TunnelSlot, TunnelSlots } from "../../../cmd/kas/agents/limits/slots.ts";
import { recordPipelines } from "../../support/redis-pipelines.ts";
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

  /** Each pipeline `client` sends: when, and how many commands it carries (a token's rewrite is one). */
  const pipelinesOf = (client: Redis) => recordPipelines(client).sent;
  const rewrites = (sent: { commands: number }[]) => sent.reduce((n, p) => n + p.commands, 0);

  it("refreshes each token at its own time in the period, not every token in one burst", async () => {
    const a = await replica(100, { liveTtlMs: 600 }); // a refresh every 200 ms, ticks of 20 ms
    const tokens = 40;
    for (let i = 0; i < tokens; i++) (await a.reserve(`k${i}`)).slot!.claim();
    const sent = pipelinesOf(clients[0]!);
    a.start();
    await until(() => rewrites(sent) >= tokens, 5000, "every token rewritten once");
    const first = sent.slice(0, sent.findIndex((_, i) => rewrites(sent.slice(0, i + 1)) >= tokens) + 1);
    const spreadMs = Math.max(...first.map((p) => p.at)) - Math.min(...first.map((p) => p.at));
    // All at once, they would come within a millisecond or two of each other.
    expect(spreadMs).toBeGreaterThan(100);
    expect(new Set(first.map((p) => Math.floor(p.at / 20))).size).toBeGreaterThan(4);
  });

  it("sends the tokens due at one tick together: one pipeline, a round trip, for many tokens", async () => {
    const a = await replica(100, { liveTtlMs: 600 }); // ~10 ticks in each 200 ms period
    const tokens = 300;
    for (let i = 0; i < tokens; i++) (await a.reserve(`k${i}`)).slot!.claim();
    const key = (i: number) => `t:agent_tunnels:k${i}`;
    const scores = async () =>
      Promise.all(
        Array.from({ length: tokens }, async (_, i) =>
          Number(await clients[0]!.zscore(key(i), (await clients[0]!.zrange(key(i), 0, 0))[0]!)),
        ),
      );
    const before = await scores();
    const sent = pipelinesOf(clients[0]!);
    a.start();
    // Every token rewritten (in Redis: a later expiry for each), with a TTL again.
    await until(
      async () => (await scores()).every((score, i) => score > before[i]!),
      5000,
      "every token rewritten",
    );
    expect(await clients[0]!.pttl(key(0))).toBeGreaterThan(0);
    // One pipeline per tick, not one round trip per token: 300 tokens in a dozen or so.
    expect(sent.length).toBeLessThan(40);
    expect(Math.max(...sent.map((p) => p.commands))).toBeGreaterThan(10);
  });

  it("writes every held slot again once Redis is back, empty, after being down", async () => {
    const a = await replica(100, { liveTtlMs: 600 });
    const tokens = 50;
    for (let i = 0; i < tokens; i++) (await a.reserve(`k${i}`)).slot!.claim();
    a.start();
    const client = clients[0]!;
    await server.stop();
    await until(() => client.status !== "ready", 5000, "the client to see Redis gone");
    await server.start(); // nothing saved: every set is gone
    await until(
      async () => {
        if (client.status !== "ready") return false;
        const sizes = await Promise.all(
          Array.from({ length: tokens }, (_, i) => client.zcard(`t:agent_tunnels:k${i}`)),
        );
        return sizes.every((n) => n === 1);
      },
      5000,
      "every token's slot back in Redis",
    );
    // Counted again across replicas: the limit holds for another.
    const b = await replica(1);
    expect((await b.reserve("k0")).slot).toBeUndefined();
  });
});
