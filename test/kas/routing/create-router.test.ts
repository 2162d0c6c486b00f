import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readKasSecrets } from "../../../cmd/kas/config/index.ts";
import { ReadinessChecks } from "../../../cmd/kas/observability/index.ts";
import { createKasRouter, toWebSocketUrl } from "../../../cmd/kas/routing/index.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { inProcessConfig, until, writeFixtures } from "../support/fixtures.ts";

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
    await router.close({ graceMs: 0 });
  });

  it("with redis: private API advertising own_url; readiness follows Redis", async () => {
    const config = inProcessConfig({
      agent: { static_tokens_file: files.tokensFile },
      redis: { server: { address: `127.0.0.1:${redis.port}` } },
      private_api: {
        listen: { authentication_secret_file: files.privateSecretFile },
        own_url: "http://10.1.2.3:8155",
      },
    });
    const readiness = new ReadinessChecks();
    const router = await createKasRouter({
      config,
      secrets: await readKasSecrets(config),
      readiness,
      redisOverrides: { reconnectMaxDelayMs: 50 },
    });
    try {
      expect(router.clustered).toBe(true);
      expect(router.privateUrl).toBe("ws://10.1.2.3:8155/");
      await until(async () => (await readiness.run()).ok, 5000, "ready with Redis");
      await redis.stop();
      await until(async () => !(await readiness.run()).ok, 5000, "not ready without Redis");
      expect((await readiness.run()).checks).toEqual([
        { name: "redis", ok: false, error: "not connected to Redis" },
      ]);
      await redis.start();
      await until(async () => (await readiness.run()).ok, 5000, "ready again");
    } finally {
      await router.close({ graceMs: 0 });
    }
  });

  it("own_url given as http(s) becomes ws(s)", () => {
    expect(toWebSocketUrl("https://kas-0.kas:8155")).toBe("wss://kas-0.kas:8155");
    expect(toWebSocketUrl("ws://x:1/")).toBe("ws://x:1/");
  });
});
