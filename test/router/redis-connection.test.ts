// The router's Redis connection settings against real redis-server processes: a password read
// from a file, TLS with a private CA, and a Sentinel that names the master. Each is proven by
// routing: an agent on replica a answers a request made at replica b, which found it in Redis.
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Router } from "../../lib/router/index.ts";
import { RedisServer } from "../support/redis-server.ts";
import { testPki } from "../support/tls-certs.ts";
import { until } from "../support/until.ts";
import {
  ask,
  eventually,
  FAST,
  PREFIX,
  type ReplicaOptions,
  SECRET,
  startAgent,
  startReplica,
} from "./harness.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "router-redis-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * Two replicas on `redis` with `options`; agent 7 on a; resolves with b's answer from it, and
 * checks that the replicas' keys are in `redis` itself (a default-port Redis may run on the machine).
 */
async function routeThrough(redis: RedisServer, options: ReplicaOptions): Promise<string> {
  const keyPrefix = `redis-connection-${randomUUID()}:`;
  const [a, b] = await Promise.all(
    ["a", "b"].map((n) => startReplica(n, redis, { ...options, redis: { ...options.redis, keyPrefix } })),
  );
  const agent = startAgent(a!, "7");
  try {
    await agent.ready(5000);
    // The registration reaches Redis shortly after the tunnel is up; b looks it up there.
    const answer = (await eventually(() => ask(b!.router, "7", "over redis"), 5000)).value;
    expect(await keysIn(redis, `${keyPrefix}*`, options)).not.toEqual([]);
    return answer;
  } finally {
    await agent.close(200);
    await Promise.all([a!.close(), b!.close()]);
  }
}

/** The keys matching `pattern` in `redis`, asked directly with the same credentials and TLS. */
async function keysIn(redis: RedisServer, pattern: string, options: ReplicaOptions): Promise<string[]> {
  const { passwordFile, tls } = options.redis ?? {};
  const client = new Redis({
    ...redis.connection,
    lazyConnect: true,
    ...(passwordFile && { password: (await readFile(passwordFile, "utf8")).trim() }),
    ...(tls && typeof tls === "object" && { tls: { ca: await readFile(tls.caFile!, "utf8") } }),
  });
  try {
    await client.connect();
    return await client.keys(pattern);
  } finally {
    client.disconnect();
  }
}

/** A router on `redis` with `options` that cannot connect: its first Redis error, and whether it connected. */
async function refusal(
  redis: RedisServer,
  options: ReplicaOptions["redis"],
): Promise<{ message: string; connected: boolean }> {
  const errors: Error[] = [];
  const router = new Router({
    privateApi: { host: "127.0.0.1", auth: { secret: SECRET } },
    redis: { server: redis.connection, keyPrefix: PREFIX, ...FAST, ...options },
    onError: (err) => errors.push(err),
  });
  await router.start();
  try {
    await until(() => errors.length > 0, 5000, "an error from the Redis connection");
    return { message: errors[0]!.message, connected: router.cluster.connected };
  } finally {
    await router.close(0);
  }
}

describe("Redis with a password (password file)", () => {
  const PASSWORD = "s3cret-redis-password";
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start({ args: ["--requirepass", PASSWORD] });
  });
  afterAll(() => redis.close());

  test("replicas that read the password from its file route through Redis", async () => {
    const passwordFile = join(dir, "redis-password");
    await writeFile(passwordFile, `${PASSWORD}\n`); // the trailing newline a secret mount has
    expect(await routeThrough(redis, { redis: { passwordFile } })).toBe("7\nover redis");
  });

  test("a wrong password: not connected, and the error says why", async () => {
    const passwordFile = join(dir, "wrong-password");
    await writeFile(passwordFile, "not-it");
    const refused = await refusal(redis, { passwordFile });
    expect(refused.message).toMatch(/WRONGPASS/);
    expect(refused.connected).toBe(false);
  });
});

describe("Redis over TLS", () => {
  let redis: RedisServer;
  let caFile: string;
  beforeAll(async () => {
    const pki = await testPki();
    const certFile = join(dir, "redis.crt");
    const keyFile = join(dir, "redis.key");
    caFile = join(dir, "ca.crt");
    await Promise.all([
      writeFile(certFile, pki.cert),
      writeFile(keyFile, pki.key),
      writeFile(caFile, pki.caCert),
    ]);
    redis = await RedisServer.start({ tls: { certFile, keyFile } });
  });
  afterAll(() => redis.close());

  test("replicas that trust the server's CA route through it", async () => {
    expect(await routeThrough(redis, { redis: { tls: { caFile } } })).toBe("7\nover redis");
  });

  test("without the CA the certificate is refused, and the error says so", async () => {
    const refused = await refusal(redis, { tls: true });
    expect(refused.message).toMatch(/certificate/i);
    expect(refused.connected).toBe(false);
  });
});

describe("Redis through Sentinel", () => {
  let master: RedisServer;
  let sentinel: RedisServer;
  beforeAll(async () => {
    master = await RedisServer.start();
    sentinel = await RedisServer.start({ sentinel: { masterName: "kas", masterPort: master.port } });
  });
  afterAll(async () => {
    await sentinel.close();
    await master.close();
  });

  test("replicas that ask the Sentinel for the master route through it", async () => {
    const options: ReplicaOptions = {
      redis: {
        // Nothing listens on the server address: only the Sentinel's answer leads to the master.
        server: { host: "127.0.0.1", port: 1 },
        sentinel: { masterName: "kas", addresses: [{ host: "127.0.0.1", port: sentinel.port }] },
      },
    };
    expect(await routeThrough(master, options)).toBe("7\nover redis");
  });
});
