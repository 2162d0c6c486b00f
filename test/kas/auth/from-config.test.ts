// Agent authentication and the Kubernetes API proxy's access as kas's configuration composes them:
// the GitLab client the `gitlab` section asks for, static tokens before GitLab, the cache's TTLs, the
// re-check interval, the proxy's static dev tokens and browser origin. GitLab is the test server.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import {
  AgentAuthError,
  agentTokenAccess,
  createAuthenticatorFromConfig,
  createGitLabClientFromConfig,
  kubernetesProxyAccess,
} from "../../../cmd/kas/auth/index.ts";
import { buildKasConfig } from "../../../cmd/kas/config/index.ts";
import { ProxyAccessError } from "../../../modules/kubernetes_api/kas/access.ts";
import { GitLabClient, GitLabError, getAgentInfo } from "../../../tool/gitlab/index.ts";
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

describe("agentTokenAccess", () => {
  const agent = { agentId: "1", projectId: "10", agentName: "dev" };

  test("a known token: its agent", async () => {
    const access = agentTokenAccess({ authenticateAgent: async () => agent });
    await expect(access("t", undefined)).resolves.toEqual(agent);
  });

  test("the caller's signal reaches the authenticator", async () => {
    const seen: (AbortSignal | undefined)[] = [];
    const access = agentTokenAccess({
      authenticateAgent: async (_token, options) => {
        seen.push(options?.signal);
        return agent;
      },
    });
    const signal = new AbortController().signal;
    await access("t", signal);
    expect(seen).toEqual([signal]);
  });

  test.each([
    ["unauthenticated", 401],
    ["permission_denied", 403],
    ["not_found", 404],
    ["unavailable", 503],
  ] as const)("a refusal (%s) keeps its HTTP status and message", async (code, status) => {
    const access = agentTokenAccess({
      authenticateAgent: () => Promise.reject(new AgentAuthError(code, `refused: ${code}`)),
    });
    const err = await access("t", undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProxyAccessError);
    expect(err).toMatchObject({ status, message: `refused: ${code}` });
  });

  test("any other failure is a 503 that does not pass on what failed", async () => {
    const access = agentTokenAccess({
      authenticateAgent: () => Promise.reject(new Error("secret internals")),
    });
    const err = await access("t", undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProxyAccessError);
    expect(err).toMatchObject({ status: 503, message: "cannot authenticate the request now" });
  });
});

describe("kubernetesProxyAccess", () => {
  test("GitLab only: no static tokens, no browsers; the bound on GitLab's cached answers", async () => {
    const access = await kubernetesProxyAccess(
      config({
        gitlab: { address: "http://127.0.0.1:1", authentication_secret_file: "/x" },
        agent: { info_cache_max_entries: 7 },
      }),
    );
    expect(access).toEqual({ gitlabAnswersMaxEntries: 7 });
  });

  test("static tokens: the token's agent, and each agent's own token", async () => {
    const access = await kubernetesProxyAccess(config({ agent: { static_tokens_file: tokensFile } }));
    await expect(access.agentToken!(STATIC_TOKEN, undefined)).resolves.toMatchObject({ agentId: "1" });
    await expect(access.agentToken!("nope", undefined)).rejects.toMatchObject({ status: 401 });
    await expect(access.staticTokenOf!("2")).resolves.toBe(OTHER_STATIC_TOKEN);
    await expect(access.staticTokenOf!("3")).resolves.toBeUndefined();
    expect(access.cors).toBeUndefined();
  });

  test("gitlab.external_url: browsers from its origin only", async () => {
    const access = await kubernetesProxyAccess(
      config({
        gitlab: {
          address: "http://127.0.0.1:1",
          authentication_secret_file: "/x",
          external_url: "https://gitlab.example.com:8443/some/path",
        },
      }),
    );
    expect(access.cors).toEqual({ allowedOrigins: ["https://gitlab.example.com:8443"] });
    expect(access.agentToken).toBeUndefined();
  });
});
