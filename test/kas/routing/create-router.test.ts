import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis, type RedisOptions } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConfigError, readKasSecrets } from "../../../cmd/kas/config/index.ts";
import { ReadinessChecks } from "../../../cmd/kas/observability/index.ts";
import { createKasRouter, REDIS_DOWN, toWebSocketUrl } from "../../../cmd/kas/routing/index.ts";
import { ask, eventually, serveAgents, startAgent } from "../../router/harness.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { testPki } from "../../support/tls-certs.ts";
import { until } from "../../support/until.ts";
import { inProcessConfig, writeFixtures } from "../support/fixtures.ts";

describe("kas router from configuration", () => {
  let dir: string;
  let files: Awaited<ReturnType<typeof writeFixtures>>;
  let redis: RedisServer;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kas-routing-"));
    files = await writeFixtures(dir);
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("without redis: single replica, no private API, no redis readiness check", async () => {
    const config = inProcessConfig({ agent: { static_tokens_file: files.tokensFile } });
    const readiness = new ReadinessChecks();
    const router = await createKasRouter({ config, secrets: await readKasSecrets(config), readiness });
    expect(router.clustered).toBe(false);
    expect(readiness.names).toEqual([]);
    await router.close(0);
  });

  /** Whether the router is connected to Redis, as its readiness check and gauge report it. */
  const redisUp = async (readiness: ReadinessChecks) => {
    const { ok, checks } = await readiness.run();
    const redisCheck = checks.find((c) => c.name === "redis");
    return ok && redisCheck !== undefined && redisCheck.detail === undefined;
  };

  it("with redis: private API advertising own_url; Redis down is a degraded detail of a ready replica, and a gauge", async () => {
    const config = inProcessConfig({
      agent: { static_tokens_file: files.tokensFile },
      redis: { server: { address: `127.0.0.1:${redis.port}` } },
      private_api: {
        listen: { authentication_secret_file: files.privateSecretFile },
        own_url: "http://10.1.2.3:8155",
      },
    });
    const readiness = new ReadinessChecks();
    const registry = new Registry();
    const router = await createKasRouter({
      config,
      secrets: await readKasSecrets(config),
      readiness,
      registry,
      redisOverrides: { reconnectMaxDelayMs: 50 },
    });
    const gauge = async () => (await registry.getSingleMetric("kas_redis_connected")!.get()).values[0]!.value;
    try {
      expect(router.clustered).toBe(true);
      expect(router.privateUrl).toBe("ws://10.1.2.3:8155/");
      await until(() => redisUp(readiness), 5000, "connected to Redis");
      expect(await readiness.run()).toEqual({ ok: true, checks: [{ name: "redis", ok: true }] });
      expect(await gauge()).toBe(1);
      await redis.stop();
      await until(async () => !(await redisUp(readiness)), 5000, "Redis reported down");
      // Still ready: every replica shares the one Redis, taking them all out would not help.
      expect(await readiness.run()).toEqual({
        ok: true,
        checks: [{ name: "redis", ok: true, detail: REDIS_DOWN }],
      });
      expect(await gauge()).toBe(0);
      await redis.start();
      await until(() => redisUp(readiness), 5000, "connected again");
      expect(await gauge()).toBe(1);
    } finally {
      await router.close(0);
    }
  });

  it("redis over TLS (private CA, ACL user and password, database 2) and through Sentinel: ready", async () => {
    const pki = await testPki();
    const [certFile, keyFile, caFile, passwordFile] = ["redis.crt", "redis.key", "ca.crt", "redis-pw"].map(
      (f) => join(dir, f),
    ) as [string, string, string, string];
    await Promise.all([
      writeFile(certFile, pki.cert),
      writeFile(keyFile, pki.key),
      writeFile(caFile, pki.caCert),
      writeFile(passwordFile, "kas-password\n"),
    ]);
    const tlsRedis = await RedisServer.start({
      tls: { certFile, keyFile },
      args: ["--user", "default", "off", "--user", "kas", "on", ">kas-password", "~*", "&*", "+@all"],
    });
    const sentinel = await RedisServer.start({ sentinel: { masterName: "kas", masterPort: redis.port } });
    /** Starts kas's router on `redisSection`; once ready, the keys under its prefix, read with `client`. */
    const keysWritten = async (redisSection: Record<string, unknown>, client: RedisOptions) => {
      const config = inProcessConfig({
        agent: { static_tokens_file: files.tokensFile },
        redis: { key_prefix: `kas-${randomUUID()}`, ...redisSection },
        private_api: { listen: { authentication_secret_file: files.privateSecretFile } },
      });
      const readiness = new ReadinessChecks();
      const router = await createKasRouter({ config, secrets: await readKasSecrets(config), readiness });
      const direct = new Redis({ ...client, lazyConnect: true });
      try {
        await until(() => redisUp(readiness), 5000, "connected to Redis");
        await direct.connect();
        // The replica's liveness key: in the Redis (and database) the configuration names.
        return await direct.keys(`${config.redis.keyPrefix}:*`);
      } finally {
        direct.disconnect();
        await router.close(0);
      }
    };
    try {
      const overTls = {
        server: { address: `localhost:${tlsRedis.port}` },
        username: "kas",
        password_file: passwordFile,
        database_index: 2,
        tls: { enabled: true, ca_certificate_file: caFile },
      };
      const tlsClient = {
        host: "localhost",
        port: tlsRedis.port,
        username: "kas",
        password: "kas-password",
        db: 2,
        tls: { ca: pki.caCert },
      };
      expect(await keysWritten(overTls, tlsClient)).not.toEqual([]);
      const viaSentinel = { sentinel: { master_name: "kas", addresses: [`127.0.0.1:${sentinel.port}`] } };
      expect(await keysWritten(viaSentinel, { host: "127.0.0.1", port: redis.port })).not.toEqual([]);
      // Without the CA, the server's certificate is not trusted: never ready.
      const untrusted = { ...overTls, tls: { enabled: true } };
      await expect(keysWritten(untrusted, tlsClient)).rejects.toThrow(
        /timed out after \d+ ms waiting for connected to Redis/,
      );
    } finally {
      await sentinel.close();
      await tlsRedis.close();
    }
  });

  it("private API over TLS: a replica reaches an agent on another over wss, trusting the configured CA", async () => {
    const pki = await testPki();
    const [certFile, keyFile, caFile] = ["peer.crt", "peer.key", "peer-ca.crt"].map((f) => join(dir, f)) as [
      string,
      string,
      string,
    ];
    await Promise.all([
      writeFile(certFile, pki.cert),
      writeFile(keyFile, pki.key),
      writeFile(caFile, pki.caCert),
    ]);
    const keyPrefix = `kas-${randomUUID()}`;
    const replica = async () => {
      const config = inProcessConfig({
        agent: { static_tokens_file: files.tokensFile },
        redis: { server: { address: `127.0.0.1:${redis.port}` }, key_prefix: keyPrefix },
        private_api: {
          listen: {
            authentication_secret_file: files.privateSecretFile,
            certificate_file: certFile,
            key_file: keyFile,
            ca_certificate_file: caFile,
          },
        },
      });
      return createKasRouter({ config, secrets: await readKasSecrets(config) });
    };
    const [a, b] = await Promise.all([replica(), replica()]);
    const agents = await serveAgents(a);
    const agent = startAgent({ agents }, "7");
    try {
      expect(a.privateUrl).toMatch(/^wss:\/\//);
      await agent.ready(5000);
      expect((await eventually(() => ask(b, "7", "over tls"), 5000)).value).toBe("7\nover tls");
    } finally {
      await agent.close(200);
      await agents.close(200);
      await Promise.all([a.close(0), b.close(0)]);
    }
  });

  it("a TLS private API with a ws:// own_url is refused at configuration", () => {
    const issues = (() => {
      try {
        inProcessConfig({
          agent: { static_tokens_file: files.tokensFile },
          redis: { server: { address: "127.0.0.1:6379" } },
          private_api: {
            listen: { authentication_secret_file: "/s", certificate_file: "/c", key_file: "/k" },
            own_url: "ws://10.0.0.1:8155",
          },
        });
        return [];
      } catch (err) {
        return (err as ConfigError).issues.map((i) => `${i.field}: ${i.message}`);
      }
    })();
    expect(issues).toEqual([
      "private_api.own_url: must be wss:// or https:// when the private API serves TLS (private_api.listen.certificate_file)",
    ]);
  });

  it("own_url given as http(s) becomes ws(s)", () => {
    expect(toWebSocketUrl("https://kas-0.kas:8155")).toBe("wss://kas-0.kas:8155");
    expect(toWebSocketUrl("ws://x:1/")).toBe("ws://x:1/");
  });
});
