// What replicas say about their agents (RedisRegistry.describe), listed cluster-wide: live
// replicas only, withdrawn entries gone, and everything written again after Redis restarts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDescription } from "../../lib/router/index.ts";
import { RedisServer } from "../support/redis-server.ts";
import { until } from "../support/until.ts";
import { eventually, next, type Replica, startReplica } from "./harness.ts";

const sorted = (list: AgentDescription[]) => list.map((d) => `${d.replicaId}/${d.agentId}=${d.info}`).sort();

describe("agent descriptions across replicas", () => {
  let redis: RedisServer;
  let a: Replica;
  let b: Replica;
  let c: Replica;
  beforeAll(async () => {
    redis = await RedisServer.start();
    [a, b, c] = (await Promise.all(["a", "b", "c"].map((n) => startReplica(n, redis)))) as [
      Replica,
      Replica,
      Replica,
    ];
  });
  afterAll(async () => {
    await Promise.all([a, b, c].map((r) => r.close()));
    await redis.close();
  });

  it("every replica lists what each live replica says, itself included; withdrawn entries go", async () => {
    a.router.cluster.describe("7", '{"tunnels":1}');
    a.router.cluster.describe("8", '{"tunnels":2}');
    b.router.cluster.describe("7", '{"tunnels":3}');
    const expected = ['a/7={"tunnels":1}', 'a/8={"tunnels":2}', 'b/7={"tunnels":3}'];
    for (const r of [a, b, c]) {
      await until(
        async () => sorted(await r.router.cluster.described()).join() === expected.join(),
        5000,
        r.name,
      );
    }
    a.router.cluster.describe("8", undefined);
    a.router.cluster.describe("7", '{"tunnels":4}'); // a newer description replaces the older one
    await until(
      async () => sorted(await c.router.cluster.described()).join() === 'a/7={"tunnels":4},b/7={"tunnels":3}',
      5000,
      "the update and the withdrawal",
    );
  });

  it("after Redis restarts empty, each replica writes its descriptions again", async () => {
    await redis.stop();
    const republished = Promise.all([
      next(a.router.cluster, "republished"),
      next(b.router.cluster, "republished"),
    ]);
    await redis.start();
    await republished;
    const { value } = await eventually(async () => {
      const list = sorted(await c.router.cluster.described());
      if (list.length < 2) throw new Error(`only ${list.join()}`);
      return list;
    }, 5000);
    expect(value).toEqual(['a/7={"tunnels":4}', 'b/7={"tunnels":3}']);
  });

  it("a replica that crashed drops out once its liveness key expires", async () => {
    await b.router.close(0, { unpublish: false }); // as after kill -9: nothing removed
    const { value, elapsedMs } = await eventually(async () => {
      const list = sorted(await c.router.cluster.described());
      if (list.some((d) => d.startsWith("b/"))) throw new Error("b still listed");
      return list;
    }, 5000);
    expect(value).toEqual(['a/7={"tunnels":4}']);
    expect(elapsedMs).toBeLessThan(3000); // the test liveness TTL is 1 s
  });
});
