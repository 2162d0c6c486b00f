// What the RedisRegistry test files share: one real redis-server per file, clients to it (as the
// tests' own, with an offline queue, or as the router makes them), registries closed after the file.
import { randomUUID } from "node:crypto";
import { Redis, type RedisOptions } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { RedisRegistry, type RedisRegistryOptions } from "../../lib/router/index.ts";
import { resolveRedisOptions } from "../../lib/router/redis-options.ts";
import { RedisServer } from "../support/redis-server.ts";
import { next } from "./harness.ts";

export interface RegistryFixture {
  redis: () => RedisServer;
  /** Connected, for looking at what the registries wrote. */
  admin: () => Redis;
  /** A lazy client with an offline queue (commands wait for the connection). */
  client: (o?: RedisOptions) => Redis;
  /** A lazy client with the router's settings: no offline queue, so a command while down fails. */
  routerClient: () => Promise<Redis>;
  registry: (o: Partial<RedisRegistryOptions> & { replicaId: string }) => RedisRegistry;
}

/** Starts a redis-server for the file (beforeAll) and closes it and every registry after it. */
export function registryFixture(): RegistryFixture {
  let redis: RedisServer;
  let admin: Redis;
  const registries: RedisRegistry[] = [];
  beforeAll(async () => {
    redis = await RedisServer.start();
    admin = client();
    await admin.connect();
  });
  afterAll(async () => {
    await Promise.all(registries.map((r) => r.close({ unpublish: false })));
    admin?.disconnect();
    await redis?.close();
  });
  function client(o: RedisOptions = {}): Redis {
    return new Redis({
      ...redis.connection,
      lazyConnect: true,
      maxRetriesPerRequest: null,
      retryStrategy: () => 20,
      ...o,
    });
  }
  return {
    redis: () => redis,
    admin: () => admin,
    client,
    routerClient: async () =>
      new Redis(await resolveRedisOptions({ server: redis.connection, reconnectMaxDelayMs: 20 })),
    registry: (o) => {
      const r = new RedisRegistry({
        commands: client(),
        subscriber: client(),
        url: `wss://${o.replicaId}`,
        ...o,
      });
      registries.push(r);
      return r;
    },
  };
}

/** Starts `r` and waits until it has written everything and hears announcements. */
export async function started(r: RedisRegistry): Promise<RedisRegistry> {
  const ready = Promise.all([next(r, "republished"), next(r, "listening")]);
  await r.start();
  await ready;
  return r;
}

export const prefix = () => `reg-${randomUUID()}:`;
