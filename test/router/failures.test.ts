import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoTunnelError, RegistryUnavailableError } from "../../lib/router/index.ts";
import type { TunnelClient } from "../../lib/tunnel/session/index.ts";
import { RedisServer } from "../support/redis-server.ts";
import { ask, eventually, next, PREFIX, type Replica, startAgent, startReplica } from "./harness.ts";

describe("a replica that dies without cleanup", () => {
  let redis: RedisServer;
  let raw: Redis;
  let a: Replica;
  let b: Replica;
  let c: Replica;
  const agents: TunnelClient[] = [];

  beforeAll(async () => {
    redis = await RedisServer.start();
    raw = new Redis(redis.connection);
    [a, b, c] = await Promise.all(["a", "b", "c"].map((n) => startReplica(n, redis)));
  });
  afterAll(async () => {
    await Promise.all(agents.map((x) => x.close(100)));
    await Promise.all([b, c].map((r) => r.close()));
    raw.disconnect();
    await redis.close();
  });

  it("drops out of lookups once its liveness expires; requests go to the live replicas", async () => {
    agents.push(startAgent(a, "601"), startAgent(c, "601"), startAgent(a, "602"));
    await Promise.all(agents.map((x) => x.ready(5000)));
    await eventually(async () => {
      const ids = (await b.router.cluster.lookup("601")).map((x) => x.replicaId).sort();
      if (ids.join() !== "a,c") throw new Error(`holders: ${ids}`);
    }, 3000);

    // Crash: the private API and the agent listener vanish, nothing is withdrawn from Redis.
    await a.router.close(0, { unpublish: false });
    for (const s of a.agents.sessions) s.destroy();
    await a.agents.listener.close(0);
    expect(await raw.hget(`${PREFIX}agent:601`, "a")).not.toBeNull();

    // A is still listed, but unreachable: the request moves on to C at once.
    const start = Date.now();
    expect(await ask(b.router, "601", "after crash")).toBe("601\nafter crash");
    expect(Date.now() - start).toBeLessThan(1000);
    // An agent only A held is simply not reachable, with the typed error.
    await expect(ask(b.router, "602", "x", 300)).rejects.toBeInstanceOf(NoTunnelError);

    // Liveness TTL (1 s in these tests): A's key expires, lookups list C only.
    await eventually(async () => {
      if ((await raw.exists(`${PREFIX}replica:a`)) !== 0) throw new Error("liveness key still there");
    }, 3000);
    expect((await b.router.cluster.lookup("601")).map((x) => x.replicaId)).toEqual(["c"]);
    // Agent entry TTL (3 s): A's own entries expire too.
    await eventually(async () => {
      await b.router.cluster.lookup("601"); // prunes expired fields
      if ((await raw.hget(`${PREFIX}agent:601`, "a")) !== null) throw new Error("entry still there");
      if ((await raw.exists(`${PREFIX}agent:602`)) !== 0) throw new Error("602 still there");
    }, 6000);
    expect(await ask(b.router, "601")).toBe("601\nping");
  });
});

describe("Redis stopped mid-test and started again", () => {
  let redis: RedisServer;
  let a: Replica;
  let b: Replica;
  const agents: TunnelClient[] = [];

  beforeAll(async () => {
    redis = await RedisServer.start();
    [a, b] = await Promise.all(["a", "b"].map((n) => startReplica(n, redis)));
  });
  afterAll(async () => {
    await Promise.all(agents.map((x) => x.close(100)));
    await Promise.all([a, b].map((r) => r.close()));
    await redis.close();
  });

  it("keeps local routes, fails remote lookups fast, and republishes everything on return", async () => {
    agents.push(startAgent(a, "701"), startAgent(b, "702"));
    await Promise.all(agents.map((x) => x.ready(5000)));
    expect(await ask(a.router, "702")).toBe("702\nping");
    expect(await ask(b.router, "701")).toBe("701\nping");

    const down = Promise.all([next(a.router.cluster, "down"), next(b.router.cluster, "down")]);
    await redis.stop();
    await down;

    expect(await ask(a.router, "701", "local")).toBe("701\nlocal");
    const start = Date.now();
    const err = await ask(a.router, "702", "remote", 5000).catch((e) => e);
    expect(err).toBeInstanceOf(RegistryUnavailableError);
    expect(err.code).toBe("REGISTRY_UNAVAILABLE");
    expect(Date.now() - start).toBeLessThan(500);

    // An agent that connects while Redis is down is published once it is back.
    const late = startAgent(b, "703");
    agents.push(late);
    await late.ready(5000);

    const republished = Promise.all([
      next(a.router.cluster, "republished"),
      next(b.router.cluster, "republished"),
    ]);
    await redis.start();
    const [[fromA], [fromB]] = await republished;
    expect(fromA).toBe(1);
    expect(fromB).toBe(2);
    expect(await ask(a.router, "702", "back")).toBe("702\nback");
    expect(await ask(a.router, "703", "back")).toBe("703\nback");
    expect(await ask(b.router, "701", "back")).toBe("701\nback");
    await expectAnnounced(a, b, "704", agents);
  });
});

describe("Redis down when the replicas start", () => {
  it("routes locally at once and publishes everything when Redis comes up", async () => {
    const redis = await RedisServer.start();
    await redis.stop();
    const [a, b] = (await Promise.all(["a", "b"].map((n) => startReplica(n, redis)))) as [Replica, Replica];
    const agent = startAgent(a, "1");
    const extra: TunnelClient[] = [];
    try {
      await agent.ready(5000);
      expect(await ask(a.router, "1")).toBe("1\nping");
      await expect(ask(b.router, "1")).rejects.toBeInstanceOf(RegistryUnavailableError);
      const republished = Promise.all([
        next(a.router.cluster, "republished"),
        next(b.router.cluster, "republished"),
      ]);
      await redis.start();
      await republished;
      expect(await ask(b.router, "1")).toBe("1\nping");
      await expectAnnounced(b, a, "2", extra);
    } finally {
      await Promise.all(extra.map((x) => x.close(100)));
      await agent.close(100);
      await Promise.all([a.close(), b.close()]);
      await redis.close();
    }
  });
});

/**
 * A request waiting at `at` is served once `agentId` connects to `holder`. Nothing polls Redis,
 * so only the pub/sub announcement can wake it: this fails if the subscription was lost.
 */
async function expectAnnounced(at: Replica, holder: Replica, agentId: string, owned: TunnelClient[]) {
  const pending = ask(at.router, agentId, "announced", 3000);
  await at.router.cluster.lookup(agentId); // queued behind the request's own lookup: it is waiting now
  const client = startAgent(holder, agentId);
  owned.push(client);
  await next(client, "connected");
  const connectedAt = Date.now();
  expect(await pending).toBe(`${agentId}\nannounced`);
  expect(Date.now() - connectedAt).toBeLessThan(1000);
}
