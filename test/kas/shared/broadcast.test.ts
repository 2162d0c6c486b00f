// Broadcasts between kas replicas over a real redis-server: every replica hears a message once
// (the sender too, at once, not by its own echo), and the sender hears it even with Redis down.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RedisBroadcast } from "../../../cmd/kas/shared/broadcast.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";

describe("RedisBroadcast", () => {
  let redis: RedisServer;
  const clients: Redis[] = [];
  const replica = () => {
    const connect = () => {
      const c = new Redis({
        host: redis.host,
        port: redis.port,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        // As kas's own (createRedisClients): RedisBroadcast subscribes again on 'ready' itself;
        // ioredis's own resubscribe, on a connection that dropped again, rejects unhandled.
        autoResubscribe: false,
        retryStrategy: () => 50,
      });
      c.on("error", () => {});
      clients.push(c);
      return c;
    };
    return new RedisBroadcast(connect(), connect(), "test:broadcast:");
  };

  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await redis.close();
  });

  test("each replica hears each message once; a malformed envelope is ignored", async () => {
    const a = replica();
    const b = replica();
    const heardA: string[] = [];
    const heardB: string[] = [];
    a.subscribe("git_push", (m) => heardA.push(m));
    b.subscribe("git_push", (m) => heardB.push(m));
    await until(
      async () =>
        clients.every((c) => c.status === "ready") &&
        (await clients[0]!.pubsub("NUMSUB", "test:broadcast:git_push"))[1] === 2,
      10_000,
      "both subscribed",
    );
    await a.publish("git_push", '{"id":"7"}');
    expect(heardA).toEqual(['{"id":"7"}']); // at once, before any round trip
    await until(() => heardB.length === 1, 10_000, "b hears it");
    await clients[0]!.publish("test:broadcast:git_push", "no envelope");
    await b.publish("git_push", '{"id":"8"}');
    await until(() => heardA.length === 2, 10_000, "a hears b's");
    expect(heardA).toEqual(['{"id":"7"}', '{"id":"8"}']); // not its own echo, not the malformed one
    expect(heardB).toEqual(['{"id":"7"}', '{"id":"8"}']);
  });

  test("with Redis down the sender's own subscribers still hear it; publish says Redis failed", async () => {
    const a = replica();
    const heard: string[] = [];
    a.subscribe("git_push", (m) => heard.push(m));
    const throwing = a.subscribe("git_push", () => {
      throw new Error("a subscriber's bug");
    });
    await redis.stop();
    await expect(a.publish("git_push", '{"id":"9"}')).rejects.toThrow();
    expect(heard).toEqual(['{"id":"9"}']);
    throwing();
    await redis.start();
  });
});
