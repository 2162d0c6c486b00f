import { afterEach, describe, expect, test } from "vitest";
import {
  AgentAuthError,
  GitLabAuthenticator,
  type GitLabAuthenticatorOptions,
} from "../../../cmd/kas/auth/index.ts";
import { GitLabClient } from "../../../tool/gitlab/index.ts";
import { AGENT, memoryLogger, startGitLab, TOKEN } from "./helpers.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function setup(options: Partial<GitLabAuthenticatorOptions> = {}, pathPrefix?: string) {
  const { api, secret } = await startGitLab(undefined, pathPrefix);
  const auth = new GitLabAuthenticator({
    gitlabUrl: api.url,
    secret,
    backoff: { initialMs: 5, maxMs: 20 },
    ...options,
  });
  cleanups.push(
    () => api.close(),
    () => auth.close(),
  );
  return { api, auth, secret };
}

async function failure(p: Promise<unknown>): Promise<AgentAuthError> {
  const err = await p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AgentAuthError);
  expect((err as Error).message).not.toContain(TOKEN);
  return err as AgentAuthError;
}

describe("GitLabAuthenticator", () => {
  test("a known token: GitLab's agent_info, mapped to AgentInfo with every field", async () => {
    const { api, auth } = await setup();
    const info = await auth.authenticateAgent(TOKEN);
    expect(info).toEqual({
      agentId: "42",
      projectId: "7",
      agentName: "prod-cluster",
      defaultBranch: "main",
      gitalyInfo: {
        address: "tcp://127.0.0.1:8075",
        token: "gitaly-secret-token",
        features: { "gitaly-feature-example": "true" },
      },
      gitalyRepository: {
        storageName: "default",
        relativePath: "group/project-7.git",
        glRepository: "project-7",
        glProjectPath: "group/project-7",
      },
    });
    expect(api.requests).toHaveLength(1);
    const [req] = api.requests;
    expect(req).toMatchObject({
      method: "GET",
      path: "/api/v4/internal/kubernetes/agent_info",
      agentToken: TOKEN,
    });
  });

  test("each request carries a fresh, short-lived HS256 JWT (iss gitlab-kas, aud gitlab) that GitLab verifies", async () => {
    const { api, auth } = await setup();
    await auth.authenticateAgent(TOKEN);
    await auth.authenticateAgent(TOKEN);
    const claims = api.requests.map((r) => {
      if (!r.jwt.ok) throw new Error(`JWT refused: ${r.jwt.reason}`);
      return r.jwt.claims;
    });
    for (const c of claims) {
      expect(c.iss).toBe("gitlab-kas");
      expect(c.aud).toBe("gitlab");
      const exp = c.exp as number;
      const now = Date.now() / 1000;
      expect(exp).toBeGreaterThan(now);
      expect(exp - now).toBeLessThanOrEqual(61);
    }
    expect(claims[0]!.jti).not.toBe(claims[1]!.jti);
  });

  test("GitLab under a relative URL root", async () => {
    const { api, auth } = await setup({}, "/gitlab");
    expect(api.url).toMatch(/\/gitlab$/);
    await expect(auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
  });

  test.each([
    ["an unknown token", 401, "unauthenticated", "invalid or revoked"],
    ["a refused token", 403, "permission_denied", "403 Forbidden"],
    ["a token of a deleted agent", 404, "not_found", "agent not found"],
  ] as const)("%s: HTTP %i -> %s, answered at once without retrying", async (_, status, code, text) => {
    const { api, auth } = await setup();
    const token = status === 401 ? "glagent-unknown-token-123456" : TOKEN;
    if (status !== 401) api.refuse(TOKEN, status);
    const err = await failure(auth.authenticateAgent(token));
    expect(err.code).toBe(code);
    expect(err.httpStatus).toBe(status);
    expect(err.definitive).toBe(true);
    expect(err.message).toContain(text);
    expect(err.message).not.toContain(token);
    expect(api.agentInfoRequests).toBe(1);
  });

  test("HTTP 500 twice, then success: retried with backoff and succeeds", async () => {
    const { api, auth } = await setup();
    api.failNext({ status: 500 }, { status: 502 });
    await expect(auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentName: AGENT.agentName });
    expect(api.requests.map((r) => r.status)).toEqual([500, 502, 200]);
  });

  test("HTTP 500 every time: unavailable (503) after maxAttempts requests", async () => {
    const { api, auth } = await setup({ maxAttempts: 3 });
    api.failNext({ status: 500 }, { status: 500 }, { status: 503 }, { status: 500 });
    const err = await failure(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unavailable");
    expect(err.httpStatus).toBe(503);
    expect(err.message).toContain("GitLab answered HTTP 503");
    expect(api.agentInfoRequests).toBe(3);
  });

  test("retries stop at the retry deadline even with attempts left", async () => {
    const { api, auth } = await setup({
      maxAttempts: 100,
      retryDeadlineMs: 300,
      backoff: { initialMs: 100, maxMs: 100, jitter: 0 },
    });
    api.failNext(...Array.from({ length: 100 }, () => ({ status: 500 })));
    const started = Date.now();
    const err = await failure(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unavailable");
    expect(Date.now() - started).toBeLessThan(1000);
    expect(api.agentInfoRequests).toBeLessThanOrEqual(4);
  });

  test("a body that is not JSON: unavailable, retried", async () => {
    const { api, auth } = await setup({ maxAttempts: 2 });
    api.failNext("malformed-json", "malformed-json");
    const err = await failure(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain("not JSON");
    expect(api.agentInfoRequests).toBe(2);
  });

  test("a body of the wrong shape: unavailable, naming the field", async () => {
    const { api, auth } = await setup({ maxAttempts: 1 });
    api.failNext("wrong-shape");
    const err = await failure(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unavailable");
    expect(err.message).toBe(
      "GitLab returned an unexpected agent_info response: agent_id: expected a positive integer id, got undefined",
    );
  });

  test("no answer within the request timeout: unavailable, then the retry succeeds", async () => {
    const { api, auth } = await setup({ requestTimeoutMs: 200 });
    api.failNext("hang");
    await expect(auth.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    expect(api.agentInfoRequests).toBe(2);
  });

  test("no answer at all: unavailable saying so", async () => {
    const { api, auth } = await setup({ requestTimeoutMs: 150, maxAttempts: 1 });
    api.failNext("hang");
    const err = await failure(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain("no answer within 150 ms");
  });

  test("GitLab not listening: unavailable, connection refused", async () => {
    const { api, auth } = await setup({ maxAttempts: 2 });
    await api.close();
    const err = await failure(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain("ECONNREFUSED");
  });

  test("a secret GitLab does not share: unavailable (not the agent's fault), logged as a misconfiguration", async () => {
    const { api } = await setup();
    const { log, text } = memoryLogger();
    const auth = new GitLabAuthenticator({
      gitlabUrl: api.url,
      secret: new Uint8Array(32).fill(1),
      log,
      maxAttempts: 1,
    });
    cleanups.push(() => auth.close());
    const err = await failure(auth.authenticateAgent(TOKEN));
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain("shared secret mismatch");
    expect(api.requests[0]!.jwt.ok).toBe(false);
    expect(text()).toContain("gitlab.authentication_secret_file");
    expect(text()).not.toContain(TOKEN);
  });

  test("the caller's signal stops the wait", async () => {
    const { api, auth } = await setup({ requestTimeoutMs: 5000 });
    api.failNext("hang");
    const controller = new AbortController();
    const pending = auth.authenticateAgent(TOKEN, { signal: controller.signal });
    await api.waitForRequests(1);
    controller.abort(new Error("handshake gone"));
    await expect(pending).rejects.toThrow("handshake gone");
  });

  test("close() closes a client of its own, and leaves a shared one to its owner", async () => {
    const { api, secret } = await startGitLab();
    cleanups.push(() => api.close());
    const own = new GitLabAuthenticator({ gitlabUrl: api.url, secret, maxAttempts: 1 });
    await own.close();
    expect((await failure(own.authenticateAgent(TOKEN))).code).toBe("unavailable");

    const client = new GitLabClient({ gitlabUrl: api.url, secret, maxAttempts: 1 });
    cleanups.push(() => client.close());
    const shared = new GitLabAuthenticator(client);
    await shared.close();
    await expect(shared.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
  });
});
