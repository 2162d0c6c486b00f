// GitLab's agent_info answers shared through a real redis-server: replicas ask GitLab once per
// token per TTL between them, refusals hold for the error TTL only, `unavailable` is never shared,
// and a Redis that is down costs a GitLab call, never an agent.

import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { CachedAuthenticator, GitLabAuthenticator } from "../../../cmd/kas/auth/index.ts";
import { SharedAnswerCache } from "../../../cmd/kas/auth/shared-answer-cache.ts";
import { dial } from "../../../lib/tunnel/index.ts";
import { tokenDigest } from "../../../tool/agent-token.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { startInProcessKas } from "../support/in-process.ts";
import { AGENT, fakeClock, startGitLab, TOKEN } from "./helpers.ts";

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(() => redis?.close());

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function client(): Promise<Redis> {
  const c = new Redis({ ...redis.connection, lazyConnect: true, maxRetriesPerRequest: 0 });
  c.on("error", () => {});
  await c.connect();
  cleanups.push(() => c.disconnect());
  return c;
}

/** `count` authenticators (replicas) over one GitLab and one Redis, each its own connection and cache. */
async function replicas(count: number, keyPrefix = `t${randomBytes(4).toString("hex")}:`) {
  const { api, secret } = await startGitLab({
    [TOKEN]: AGENT,
    "glagent-second-token-abcdef": { agentId: 2, projectId: 2, agentName: "two" },
  });
  const gitlab = new GitLabAuthenticator({ gitlabUrl: api.url, secret, maxAttempts: 1 });
  cleanups.push(
    () => api.close(),
    () => gitlab.close(),
  );
  const clock = fakeClock();
  const errors: Error[] = [];
  const made = [];
  for (let i = 0; i < count; i++) {
    const c = await client();
    const shared = new SharedAnswerCache({
      redis: { client: c, keyPrefix },
      now: clock.now,
      onError: (e) => errors.push(e),
    });
    const auth = new CachedAuthenticator(gitlab, {
      ttlMs: 300_000,
      errorTtlMs: 60_000,
      now: clock.now,
      shared,
    });
    made.push({ auth, client: c });
  }
  return { api, clock, errors, keyPrefix, replicas: made };
}

describe("agent_info shared through Redis", () => {
  test("two replicas ask GitLab once for a token within the TTL, and again after it", async () => {
    const {
      api,
      clock,
      replicas: [a, b],
    } = await replicas(2);
    await expect(a!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    await expect(b!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({
      agentId: "42",
      agentName: "prod-cluster",
    });
    clock.advance(299_999);
    await b!.auth.authenticateAgent(TOKEN);
    await a!.auth.authenticateAgent(TOKEN);
    expect(api.agentInfoRequests).toBe(1);
    clock.advance(1);
    await b!.auth.authenticateAgent(TOKEN);
    await a!.auth.authenticateAgent(TOKEN);
    expect(api.agentInfoRequests).toBe(2);
  });

  test("a refusal is shared for the error TTL only", async () => {
    const {
      api,
      clock,
      replicas: [a, b],
    } = await replicas(2);
    api.refuse(TOKEN, 403);
    await expect(a!.auth.authenticateAgent(TOKEN)).rejects.toMatchObject({ code: "permission_denied" });
    clock.advance(59_999);
    await expect(b!.auth.authenticateAgent(TOKEN)).rejects.toMatchObject({ code: "permission_denied" });
    expect(api.agentInfoRequests).toBe(1);
    clock.advance(1);
    await expect(b!.auth.authenticateAgent(TOKEN)).rejects.toMatchObject({ code: "permission_denied" });
    expect(api.agentInfoRequests).toBe(2);
    // The replica that asked first holds it no longer than the TTL either.
    await expect(a!.auth.authenticateAgent(TOKEN)).rejects.toMatchObject({ code: "permission_denied" });
    expect(api.agentInfoRequests).toBe(2);
  });

  test("'unavailable' is never cached nor shared: the other replica asks GitLab and gets in", async () => {
    const {
      api,
      replicas: [a, b],
    } = await replicas(2);
    api.failNext({ status: 500 });
    await expect(a!.auth.authenticateAgent(TOKEN)).rejects.toMatchObject({ code: "unavailable" });
    await expect(b!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    await expect(a!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    expect(api.agentInfoRequests).toBe(2);
  });

  test("concurrent lookups of one token on one replica share one Redis read and one GitLab request", async () => {
    const {
      api,
      replicas: [a],
    } = await replicas(1);
    const all = await Promise.all(Array.from({ length: 10 }, () => a!.auth.authenticateAgent(TOKEN)));
    expect(new Set(all.map((i) => i.agentId))).toEqual(new Set(["42"]));
    expect(api.agentInfoRequests).toBe(1);
  });

  test("Redis holds neither the token nor the answer in the clear, under the token's SHA-256", async () => {
    const {
      keyPrefix,
      replicas: [a],
    } = await replicas(1);
    await a!.auth.authenticateAgent(TOKEN);
    const c = await client();
    const keys = await c.keys(`${keyPrefix}*`);
    expect(keys).toEqual([`${keyPrefix}agent_info:${tokenDigest(TOKEN).toString("base64url")}`]);
    const value = (await c.getBuffer(keys[0]!))!;
    expect(value.includes(Buffer.from(TOKEN))).toBe(false);
    expect(value.includes(Buffer.from("prod-cluster"))).toBe(false);
    expect(value.includes(Buffer.from("gitaly-secret-token"))).toBe(false);
    // Redis collects it after the TTL.
    const ttl = await c.pttl(keys[0]!);
    expect(ttl).toBeGreaterThan(290_000);
    expect(ttl).toBeLessThanOrEqual(300_000);
  });

  test("an entry sealed for another token, or not sealed at all, reads as a miss", async () => {
    const {
      api,
      keyPrefix,
      replicas: [a],
    } = await replicas(1);
    const other = "glagent-second-token-abcdef";
    await a!.auth.authenticateAgent(other);
    const c = await client();
    const key = (t: string) => `${keyPrefix}agent_info:${tokenDigest(t).toString("base64url")}`;
    // Agent 2's answer copied under TOKEN's key: it does not open with TOKEN's key.
    await c.set(key(TOKEN), (await c.getBuffer(key(other)))!);
    await expect(a!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    expect(api.agentInfoRequests).toBe(2);
  });

  test("Redis down: agents still get in (GitLab, then this process's cache), and Redis back is used again", async () => {
    const {
      api,
      errors,
      replicas: [a, b],
    } = await replicas(2);
    await Promise.all([once(a!.client, "close"), once(b!.client, "close"), redis.stop()]);
    try {
      await expect(a!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
      await expect(a!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
      expect(api.agentInfoRequests).toBe(1);
      expect(errors.length).toBeGreaterThan(0);
      await expect(b!.auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
      expect(api.agentInfoRequests).toBe(2);
    } finally {
      await redis.start();
    }
    await Promise.all([once(a!.client, "ready"), once(b!.client, "ready")]);
    await a!.auth.authenticateAgent("glagent-second-token-abcdef");
    await b!.auth.authenticateAgent("glagent-second-token-abcdef");
    expect(api.agentInfoRequests).toBe(3);
  });
});

describe("two kas replicas on one Redis", () => {
  test("an agent dialing each replica in turn costs GitLab one agent_info call", async () => {
    const { api, secret } = await startGitLab();
    cleanups.push(() => api.close());
    const dir = await mkdtemp(join(tmpdir(), "kas-shared-auth-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const secretFile = join(dir, "gitlab_secret");
    await writeFile(secretFile, Buffer.from(secret).toString("base64"));
    const kases = [];
    for (let i = 0; i < 2; i++) {
      const kas = await startInProcessKas(
        (c) => {
          c.gitlab.address = api.url;
          c.gitlab.authenticationSecretFile = secretFile;
          c.redis.keyPrefix = "shared-auth-test";
        },
        { redis: { host: redis.host, port: redis.port } },
      );
      cleanups.push(() => kas.close());
      kases.push(kas);
    }
    for (const kas of kases) {
      const conn = await dial(kas.addresses.agent, {
        headers: { authorization: `Bearer ${TOKEN}` },
        proxy: false,
      });
      conn.close();
    }
    expect(api.agentInfoRequests).toBe(1);
  });
});
