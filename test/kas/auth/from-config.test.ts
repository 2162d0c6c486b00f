// Agent authentication as kas's configuration composes it: the GitLab client the `gitlab` section
// asks for, static tokens before GitLab, the cache's TTLs, the re-check interval. GitLab is the
// test server on loopback.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import {
  AgentAuthError,
  createAuthenticatorFromConfig,
  createGitLabClientFromConfig,
} from "../../../cmd/kas/auth/index.ts";
import { SharedAnswerCache } from "../../../cmd/kas/auth/shared-answer-cache.ts";
import { buildKasConfig } from "../../../cmd/kas/config/index.ts";
import { GitLabClient, GitLabError, getAgentInfo } from "../../../tool/gitlab/index.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { AGENT, memoryLogger, startGitLab, TOKEN } from "./helpers.ts";

const STATIC_TOKEN = "dev-token-static-Wq4zN7";
const OTHER_STATIC_TOKEN = "dev-token-static-Yk2mB9";

let dir: string;
let tokensFile: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-auth-config-"));
  tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${STATIC_TOKEN}: {agentId: 1, projectId: 10, agentName: dev}\n${OTHER_STATIC_TOKEN}: {agentId: 2, projectId: 10, agentName: qa}\n`,
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const config = (raw: { gitlab?: object; agent?: object }) => buildKasConfig(raw, {});

async function gitlabSetup(gitlab: object = {}, agent: object = {}) {
  const { api, secret } = await startGitLab();
  cleanups.push(() => api.close());
  const cfg = config({
    gitlab: { address: api.url, authentication_secret_file: "/etc/kas/secret", ...gitlab },
    agent,
  });
  const { log, text } = memoryLogger();
  const client = createGitLabClientFromConfig(cfg, { gitlabAuthSecret: secret }, log)!;
  cleanups.push(() => client.close());
  return { api, cfg, client, log: text };
}

async function refusal(p: Promise<unknown>): Promise<AgentAuthError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AgentAuthError);
  return err as AgentAuthError;
}

describe("createGitLabClientFromConfig", () => {
  test("without gitlab.address: no client", () => {
    expect(createGitLabClientFromConfig(config({ agent: { static_tokens_file: tokensFile } }), {})).toBe(
      undefined,
    );
  });

  test("with gitlab.address but no secret read: an error naming the setting", () => {
    const cfg = config({ gitlab: { address: "http://127.0.0.1:1", authentication_secret_file: "/x" } });
    expect(() => createGitLabClientFromConfig(cfg, {})).toThrow(
      "gitlab.authentication_secret_file was not read",
    );
  });

  test("GitLab's URL and the shared secret: GitLab answers, and its failures reach the log", async () => {
    const { api, client, log } = await gitlabSetup({}, {});
    expect(client).toBeInstanceOf(GitLabClient);
    await expect(getAgentInfo(client, TOKEN)).resolves.toMatchObject({ agentName: AGENT.agentName });
    expect(api.requests[0]!.jwt.ok).toBe(true);
    api.failNext({ status: 500 }, { status: 500 }, { status: 500 }, { status: 500 }, { status: 500 });
    await expect(getAgentInfo(client, TOKEN)).rejects.toBeInstanceOf(GitLabError);
    expect(log()).toContain("GitLab agent_info failed");
  });

  test("gitlab.request_timeout bounds one request", async () => {
    const { api, client } = await gitlabSetup({ request_timeout: "0.2s", retry_deadline: "0.25s" });
    api.failNext("hang", "hang");
    await expect(getAgentInfo(client, TOKEN)).rejects.toThrow(/no answer within 200 ms/);
  });

  test("gitlab.retry_deadline bounds the retries", async () => {
    const { api, client } = await gitlabSetup({ request_timeout: "5s", retry_deadline: "0.25s" });
    api.failNext("hang", "hang");
    await expect(getAgentInfo(client, TOKEN)).rejects.toThrow(/no answer within (2[0-4]\d|250) ms/);
  });

  test("gitlab.ca_certificate_file is read for the client's TLS", async () => {
    const cfg = config({
      gitlab: {
        address: "https://127.0.0.1:1",
        authentication_secret_file: "/x",
        ca_certificate_file: join(dir, "missing-ca.pem"),
      },
    });
    expect(() => createGitLabClientFromConfig(cfg, { gitlabAuthSecret: new Uint8Array(32).fill(7) })).toThrow(
      /ENOENT.*missing-ca\.pem/,
    );
  });
});

describe("createAuthenticatorFromConfig", () => {
  test("neither GitLab nor static tokens: refused at start", async () => {
    const cfg = config({ agent: { static_tokens_file: tokensFile } });
    const withoutTokens = { ...cfg, agent: { ...cfg.agent, staticTokensFile: undefined } };
    await expect(createAuthenticatorFromConfig(withoutTokens, undefined)).rejects.toThrow(
      "no agent authentication configured (gitlab.address or agent.static_tokens_file)",
    );
  });

  test("static tokens only: their agents; any other token is unauthenticated; nothing to re-check", async () => {
    const auth = await createAuthenticatorFromConfig(
      config({ agent: { static_tokens_file: tokensFile } }),
      undefined,
    );
    expect(auth.recheckIntervalMs).toBeUndefined();
    await expect(auth.authenticateAgent(STATIC_TOKEN)).resolves.toEqual({
      agentId: "1",
      projectId: "10",
      agentName: "dev",
    });
    const err = await refusal(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unauthenticated");
  });

  test("GitLab only: its answers and refusals, as GitLab gave them; re-checked every info_cache_ttl", async () => {
    const { api, cfg, client } = await gitlabSetup({}, { info_cache_ttl: "42s" });
    const auth = await createAuthenticatorFromConfig(cfg, client);
    expect(auth.recheckIntervalMs).toBe(42_000);
    await expect(auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    const unknown = await refusal(auth.authenticateAgent("glagent-unknown-Xv3bN8qL"));
    expect(unknown.code).toBe("unauthenticated");
    expect(unknown.cause).toBeInstanceOf(GitLabError); // GitLab's own refusal, passed on
    api.failNext({ status: 500 }, { status: 500 }, { status: 500 }, { status: 500 });
    const down = await refusal(auth.authenticateAgent("glagent-other-Tz5qW2nR"));
    expect(down.code).toBe("unavailable");
  });

  test("both: static tokens first, GitLab for every other token", async () => {
    const { api, cfg, client } = await gitlabSetup({}, { static_tokens_file: tokensFile });
    const auth = await createAuthenticatorFromConfig(cfg, client);
    expect(auth.recheckIntervalMs).toBe(300_000);
    await expect(auth.authenticateAgent(OTHER_STATIC_TOKEN)).resolves.toMatchObject({ agentName: "qa" });
    expect(api.agentInfoRequests).toBe(0);
    await expect(auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentName: AGENT.agentName });
    expect(api.agentInfoRequests).toBe(1);
    api.failNext({ status: 500 }, { status: 500 }, { status: 500 }, { status: 500 });
    const down = await refusal(auth.authenticateAgent("glagent-other-Tz5qW2nR"));
    expect(down.code).toBe("unavailable");
  });

  test("GitLab's answers are cached for agent.info_cache_ttl, refusals for info_cache_error_ttl", async () => {
    const cached = await gitlabSetup({}, {});
    const auth = await createAuthenticatorFromConfig(cached.cfg, cached.client);
    for (let i = 0; i < 2; i++) {
      await auth.authenticateAgent(TOKEN);
      await auth.authenticateAgent("glagent-unknown-Xv3bN8qL").catch(() => {});
    }
    expect(cached.api.agentInfoRequests).toBe(2);

    const uncached = await gitlabSetup({}, { info_cache_ttl: "0s", info_cache_error_ttl: "0s" });
    const fresh = await createAuthenticatorFromConfig(uncached.cfg, uncached.client);
    for (let i = 0; i < 2; i++) {
      await fresh.authenticateAgent(TOKEN);
      await fresh.authenticateAgent("glagent-unknown-Xv3bN8qL").catch(() => {});
    }
    expect(uncached.api.agentInfoRequests).toBe(4);
  });

  test("the cache holds agent.info_cache_max_entries answers", async () => {
    const { api, cfg, client } = await gitlabSetup({}, { info_cache_max_entries: 1 });
    const auth = await createAuthenticatorFromConfig(cfg, client);
    await auth.authenticateAgent(TOKEN);
    await auth.authenticateAgent("glagent-unknown-Xv3bN8qL").catch(() => {});
    await auth.authenticateAgent(TOKEN);
    expect(api.agentInfoRequests).toBe(3);
  });
});

describe("createAuthenticatorFromConfig with Redis", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(() => redis?.close());

  test("two replicas built from the configuration ask GitLab once between them", async () => {
    const { api, cfg, client } = await gitlabSetup();
    const keyPrefix = "from-config:";
    const replicas = [];
    for (let i = 0; i < 2; i++) {
      const c = new Redis({ ...redis.connection, lazyConnect: true, maxRetriesPerRequest: 0 });
      c.on("error", () => {});
      await c.connect();
      cleanups.push(() => c.disconnect());
      const shared = new SharedAnswerCache({ redis: { client: c, keyPrefix } });
      replicas.push(await createAuthenticatorFromConfig(cfg, client, shared));
    }
    for (const auth of replicas)
      await expect(auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    expect(api.agentInfoRequests).toBe(1);
  });
});
