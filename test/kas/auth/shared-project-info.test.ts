// GitLab's project_info answers shared through a real redis-server: replicas ask GitLab once per
// (token, project) per TTL between them, refusals hold for the error TTL only, `unavailable` is
// never shared, an entry moved under another project's key does not open, and a Redis that is
// down costs a GitLab call, never an answer.

import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import {
  createProjectAccessFromConfig,
  GitLabProjectAccess,
  PROJECT_INFO,
} from "../../../cmd/kas/auth/project-access.ts";
import { SharedAnswerCache } from "../../../cmd/kas/auth/shared-answer-cache.ts";
import type { KasConfig } from "../../../cmd/kas/config/index.ts";
import type { AgentIdentity, ProjectAccess } from "../../../modules/runtime/kas.ts";
import { AgentToken } from "../../../tool/agent-token.ts";
import { GitLabClient } from "../../../tool/gitlab/index.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";
import { RedisServer } from "../../support/redis-server.ts";

const TOKEN = "glagent-shared-projects-Hc4rT9wQ";
const OTHER_TOKEN = "glagent-shared-projects-other-Zm3k";
const GITALY = { address: "tcp://127.0.0.1:8075", token: "gitaly-secret", features: {} };
const TTL = 300_000;
const ERROR_TTL = 60_000;

const agent = (token = TOKEN): AgentIdentity => ({
  agentId: "42",
  projectId: "7",
  agentName: "prod",
  token: new AgentToken(token),
  gitalyInfo: GITALY,
});

let redis: RedisServer;
let gitlab: GitLabApiServer;
let client: GitLabClient;
beforeAll(async () => {
  redis = await RedisServer.start();
  const secret = new Uint8Array(randomBytes(32));
  gitlab = await GitLabApiServer.start({
    secret,
    agents: {
      [TOKEN]: { agentId: 42, projectId: 7, agentName: "prod" },
      [OTHER_TOKEN]: { agentId: 43, projectId: 7, agentName: "staging" },
    },
    projects: [
      { projectId: 99, path: "group/manifests" },
      { projectId: 101, path: "group/other" },
      { projectId: 100, path: "group/private", readers: [] },
    ],
  });
  client = new GitLabClient({ gitlabUrl: gitlab.url, secret, maxAttempts: 1 });
});
afterAll(async () => {
  await client?.close();
  await gitlab?.close();
  await redis?.close();
});

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function connect(): Promise<Redis> {
  const c = new Redis({ ...redis.connection, lazyConnect: true, maxRetriesPerRequest: 0 });
  c.on("error", () => {});
  await c.connect();
  cleanups.push(() => c.disconnect());
  return c;
}

/** `count` replicas' project access over one GitLab and one Redis, each its own connection and cache. */
async function replicas(count: number) {
  const keyPrefix = `t${randomBytes(4).toString("hex")}:`;
  let now = 1_000_000;
  const clock = {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
  const errors: Error[] = [];
  const made = [];
  for (let i = 0; i < count; i++) {
    const c = await connect();
    const shared = new SharedAnswerCache({
      redis: { client: c, keyPrefix },
      now: clock.now,
      onError: (e) => errors.push(e),
    });
    const access = new GitLabProjectAccess(client, {
      ttlMs: TTL,
      errorTtlMs: ERROR_TTL,
      now: clock.now,
      shared,
    });
    made.push({ access, client: c, shared });
  }
  const before = gitlab.projectInfoRequests;
  return { asked: () => gitlab.projectInfoRequests - before, clock, errors, replicas: made };
}

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => "answered",
    (e: { code?: string }) => e.code,
  );

describe("project_info shared through Redis", () => {
  test("two replicas ask GitLab once for a token and project within the TTL, and again after it", async () => {
    const {
      asked,
      clock,
      replicas: [a, b],
    } = await replicas(2);
    const first = await a!.access.repositoryFor(agent(), "group/manifests");
    expect(first.projectId).toBe("99");
    await expect(b!.access.repositoryFor(agent(), "group/manifests")).resolves.toEqual(first);
    clock.advance(TTL - 1);
    await b!.access.repositoryFor(agent(), "group/manifests");
    await a!.access.repositoryFor(agent(), "group/manifests");
    expect(asked()).toBe(1);
    clock.advance(1);
    await b!.access.repositoryFor(agent(), "group/manifests");
    await a!.access.repositoryFor(agent(), "group/manifests");
    expect(asked()).toBe(2);
  });

  test("another project, or the same project with another token, asks GitLab again", async () => {
    const {
      asked,
      replicas: [a, b],
    } = await replicas(2);
    await a!.access.repositoryFor(agent(), "group/manifests");
    await expect(b!.access.repositoryFor(agent(), "group/other")).resolves.toMatchObject({
      projectId: "101",
    });
    expect(asked()).toBe(2);
    await b!.access.repositoryFor(agent(OTHER_TOKEN), "group/manifests");
    expect(asked()).toBe(3);
  });

  test("a refusal is shared for the error TTL only", async () => {
    const {
      asked,
      clock,
      replicas: [a, b],
    } = await replicas(2);
    expect(await codeOf(a!.access.repositoryFor(agent(), "group/private"))).toBe("forbidden");
    expect(await codeOf(a!.access.repositoryFor(agent(), "group/none"))).toBe("not_found");
    clock.advance(ERROR_TTL - 1);
    expect(await codeOf(b!.access.repositoryFor(agent(), "group/private"))).toBe("forbidden");
    const shared = b!.access.repositoryFor(agent(), "group/none");
    await expect(shared).rejects.toThrow(/^project "group\/none": GitLab does not know it/);
    expect(asked()).toBe(2);
    clock.advance(1);
    expect(await codeOf(b!.access.repositoryFor(agent(), "group/private"))).toBe("forbidden");
    expect(asked()).toBe(3);
    // The replica that asked first holds it no longer than the error TTL either.
    expect(await codeOf(a!.access.repositoryFor(agent(), "group/private"))).toBe("forbidden");
    expect(asked()).toBe(3);
  });

  test("'unavailable' is never cached nor shared: each replica asks GitLab, and gets in when it answers", async () => {
    const {
      asked,
      replicas: [a, b],
    } = await replicas(2);
    gitlab.failNext({ status: 500 }, { status: 500 });
    expect(await codeOf(a!.access.repositoryFor(agent(), "group/manifests"))).toBe("unavailable");
    expect(await codeOf(b!.access.repositoryFor(agent(), "group/manifests"))).toBe("unavailable");
    expect(asked()).toBe(2);
    const c = await connect();
    expect(await c.exists(a!.shared.key(PROJECT_INFO, TOKEN, "group/manifests"))).toBe(0);
    // Nor did the replica that got it keep it.
    await expect(a!.access.repositoryFor(agent(), "group/manifests")).resolves.toMatchObject({
      projectId: "99",
    });
    expect(asked()).toBe(3);
  });

  test("concurrent lookups of one token and project on one replica share one GitLab request", async () => {
    const {
      asked,
      replicas: [a],
    } = await replicas(1);
    const all = await Promise.all(
      Array.from({ length: 10 }, () => a!.access.repositoryFor(agent(), "group/manifests")),
    );
    expect(new Set(all.map((r) => r.projectId))).toEqual(new Set(["99"]));
    expect(asked()).toBe(1);
  });

  test("Redis holds neither the token nor the answer in the clear, for the TTL", async () => {
    const {
      replicas: [a],
    } = await replicas(1);
    await a!.access.repositoryFor(agent(), "group/manifests");
    const key = a!.shared.key(PROJECT_INFO, TOKEN, "group/manifests");
    const c = await connect();
    const value = (await c.getBuffer(key))!;
    expect(value).not.toBeNull();
    for (const clear of [TOKEN, "group/manifests", "gitaly"])
      expect(value.includes(Buffer.from(clear))).toBe(false);
    expect(key).not.toContain("group");
    expect(key).toMatch(/^t[0-9a-f]{8}:project_info:[\w-]+$/); // the kind, apart from agent_info's
    const ttl = await c.pttl(key);
    expect(ttl).toBeGreaterThan(TTL - 10_000);
    expect(ttl).toBeLessThanOrEqual(TTL);
  });

  test("an answer lives in Redis for the access's TTL, a refusal for its error TTL (5 and 1 min by default)", async () => {
    const c = await connect();
    const shared = new SharedAnswerCache({
      redis: { client: c, keyPrefix: `t${randomBytes(4).toString("hex")}:` },
    });
    /** Redis's TTLs of an answer and a refusal the access just got from GitLab. */
    const ttls = async (access: GitLabProjectAccess) => {
      await access.repositoryFor(agent(), "group/manifests");
      await access.repositoryFor(agent(), "group/private").catch(() => {});
      const answer = await c.pttl(shared.key(PROJECT_INFO, TOKEN, "group/manifests"));
      const refusal = await c.pttl(shared.key(PROJECT_INFO, TOKEN, "group/private"));
      await c.del(
        shared.key(PROJECT_INFO, TOKEN, "group/manifests"),
        shared.key(PROJECT_INFO, TOKEN, "group/private"),
      );
      return [answer, refusal];
    };
    const [answer, refusal] = await ttls(
      new GitLabProjectAccess(client, { ttlMs: 120_000, errorTtlMs: 30_000, shared }),
    );
    expect(answer).toBeGreaterThan(110_000);
    expect(answer).toBeLessThanOrEqual(120_000);
    expect(refusal).toBeGreaterThan(20_000);
    expect(refusal).toBeLessThanOrEqual(30_000);
    const [byDefault, refusalByDefault] = await ttls(new GitLabProjectAccess(client, { shared }));
    expect(byDefault).toBeGreaterThan(TTL - 10_000);
    expect(byDefault).toBeLessThanOrEqual(TTL);
    expect(refusalByDefault).toBeGreaterThan(ERROR_TTL - 10_000);
    expect(refusalByDefault).toBeLessThanOrEqual(ERROR_TTL);
  });

  test("an entry copied under another project's key reads as a miss", async () => {
    const {
      asked,
      replicas: [a, b],
    } = await replicas(2);
    await a!.access.repositoryFor(agent(), "group/manifests");
    const c = await connect();
    const sealed = (await c.getBuffer(a!.shared.key(PROJECT_INFO, TOKEN, "group/manifests")))!;
    // group/manifests's answer under group/private's key: were it believed, the agent would read
    // a project GitLab refuses it.
    await c.set(a!.shared.key(PROJECT_INFO, TOKEN, "group/private"), sealed);
    expect(await codeOf(b!.access.repositoryFor(agent(), "group/private"))).toBe("forbidden");
    expect(asked()).toBe(2);
  });

  test("Redis down: each replica still answers from GitLab, then its own cache; Redis back is used again", async () => {
    const {
      asked,
      errors,
      replicas: [a, b],
    } = await replicas(2);
    // Each wait bounded: a connection that never closes or comes back fails here, not at the test timeout.
    const closed = { signal: AbortSignal.timeout(10_000) };
    await Promise.all([once(a!.client, "close", closed), once(b!.client, "close", closed), redis.stop()]);
    try {
      await expect(a!.access.repositoryFor(agent(), "group/manifests")).resolves.toMatchObject({
        projectId: "99",
      });
      await a!.access.repositoryFor(agent(), "group/manifests");
      expect(asked()).toBe(1);
      expect(errors.length).toBeGreaterThan(0);
      await expect(b!.access.repositoryFor(agent(), "group/manifests")).resolves.toMatchObject({
        projectId: "99",
      });
      expect(asked()).toBe(2);
    } finally {
      await redis.start();
    }
    const ready = { signal: AbortSignal.timeout(10_000) };
    await Promise.all([once(a!.client, "ready", ready), once(b!.client, "ready", ready)]);
    await a!.access.repositoryFor(agent(), "group/other");
    await b!.access.repositoryFor(agent(), "group/other");
    expect(asked()).toBe(3);
  });
});

describe("createProjectAccessFromConfig with Redis", () => {
  test("two replicas' project access built from the configuration asks GitLab once", async () => {
    const config = {
      agent: {
        infoCacheMaxEntries: 10_000,
        gitops: { projectInfoCacheTtlMs: TTL, projectInfoCacheErrorTtlMs: ERROR_TTL },
      },
    } as KasConfig;
    const keyPrefix = `t${randomBytes(4).toString("hex")}:`;
    const made: ProjectAccess[] = [];
    for (let i = 0; i < 2; i++) {
      const shared = new SharedAnswerCache({ redis: { client: await connect(), keyPrefix } });
      made.push(createProjectAccessFromConfig(config, client, shared));
    }
    const before = gitlab.projectInfoRequests;
    for (const access of made) await access.repositoryFor(agent(), "group/manifests");
    expect(gitlab.projectInfoRequests - before).toBe(1);
  });
});
