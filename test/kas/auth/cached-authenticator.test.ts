import { afterEach, describe, expect, test } from "vitest";
import { AGENT_INFO } from "../../../cmd/kas/auth/cached-authenticator.ts";
import { AgentAuthError, CachedAuthenticator, GitLabAuthenticator } from "../../../cmd/kas/auth/index.ts";
import { AGENT, fakeClock, startGitLab, TOKEN } from "./helpers.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function setup(options: { maxEntries?: number } = {}) {
  const { api, secret } = await startGitLab({
    [TOKEN]: AGENT,
    "glagent-second-token-abcdef": { agentId: 2, projectId: 2, agentName: "two" },
    "glagent-third-token-abcdefg": { agentId: 3, projectId: 3, agentName: "three" },
  });
  const gitlab = new GitLabAuthenticator({ gitlabUrl: api.url, secret, maxAttempts: 1 });
  const clock = fakeClock();
  const cache = new CachedAuthenticator(gitlab, {
    ttlMs: 300_000,
    errorTtlMs: 60_000,
    now: clock.now,
    ...options,
  });
  cleanups.push(
    () => api.close(),
    () => gitlab.close(),
  );
  return { api, cache, clock };
}

describe("CachedAuthenticator over GitLab", () => {
  test("success is cached for the TTL, then asked again", async () => {
    const { api, cache, clock } = await setup();
    await cache.authenticateAgent(TOKEN);
    clock.advance(299_999);
    await expect(cache.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    expect(api.agentInfoRequests).toBe(1);
    clock.advance(1);
    await cache.authenticateAgent(TOKEN);
    expect(api.agentInfoRequests).toBe(2);
  });

  test.each([
    ["unknown token", "glagent-not-known-to-gitlab", undefined, "unauthenticated"],
    ["refused token", TOKEN, 403, "permission_denied"],
    ["deleted agent", TOKEN, 404, "not_found"],
  ] as const)("a definitive refusal (%s) is cached for the error TTL", async (_, token, refusal, code) => {
    const { api, cache, clock } = await setup();
    if (refusal) api.refuse(TOKEN, refusal);
    await expect(cache.authenticateAgent(token)).rejects.toMatchObject({ code });
    clock.advance(59_999);
    await expect(cache.authenticateAgent(token)).rejects.toMatchObject({ code });
    expect(api.agentInfoRequests).toBe(1);
    clock.advance(1);
    await expect(cache.authenticateAgent(token)).rejects.toMatchObject({ code });
    expect(api.agentInfoRequests).toBe(2);
  });

  test("unavailable is not cached: the next attempt reaches GitLab and gets in", async () => {
    const { api, cache } = await setup();
    api.failNext({ status: 500 });
    await expect(cache.authenticateAgent(TOKEN)).rejects.toMatchObject({ code: "unavailable" });
    await expect(cache.authenticateAgent(TOKEN)).resolves.toMatchObject({ agentId: "42" });
    expect(api.agentInfoRequests).toBe(2);
  });

  test("concurrent lookups of one token share one request", async () => {
    const { api, cache } = await setup();
    const results = await Promise.all(Array.from({ length: 10 }, () => cache.authenticateAgent(TOKEN)));
    expect(new Set(results.map((r) => r.agentId))).toEqual(new Set(["42"]));
    expect(api.agentInfoRequests).toBe(1);
  });

  test("bounded: beyond maxEntries the least recently used token is forgotten", async () => {
    const { api, cache } = await setup({ maxEntries: 2 });
    await cache.authenticateAgent(TOKEN);
    await cache.authenticateAgent("glagent-second-token-abcdef");
    await cache.authenticateAgent(TOKEN); // TOKEN is now the most recently used
    await cache.authenticateAgent("glagent-third-token-abcdefg"); // evicts the second
    expect(cache.size).toBe(2);
    expect(api.agentInfoRequests).toBe(3);
    await cache.authenticateAgent(TOKEN);
    expect(api.agentInfoRequests).toBe(3);
    await cache.authenticateAgent("glagent-second-token-abcdef");
    expect(api.agentInfoRequests).toBe(4);
  });
});

describe("CachedAuthenticator", () => {
  test("a caller's abort rejects that caller only; the shared lookup still completes for others", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let calls = 0;
    const cache = new CachedAuthenticator({
      authenticateAgent: async () => {
        calls++;
        await gate;
        return { agentId: "1", projectId: "1", agentName: "a" };
      },
    });
    const controller = new AbortController();
    const aborted = cache.authenticateAgent(TOKEN, { signal: controller.signal });
    const other = cache.authenticateAgent(TOKEN);
    controller.abort(new Error("went away"));
    await expect(aborted).rejects.toThrow("went away");
    release();
    await expect(other).resolves.toMatchObject({ agentId: "1" });
    expect(calls).toBe(1);
  });

  test("an inner failure that is not an AgentAuthError becomes unavailable (and is not cached)", async () => {
    let calls = 0;
    const cache = new CachedAuthenticator({
      authenticateAgent: async () => {
        calls++;
        throw new TypeError("bug");
      },
    });
    const err = await cache.authenticateAgent(TOKEN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentAuthError);
    expect(err).toMatchObject({ code: "unavailable" });
    await cache.authenticateAgent(TOKEN).catch(() => {});
    expect(calls).toBe(2);
  });
});

describe("AGENT_INFO: the answer as Redis holds it", () => {
  const info = { agentId: "42", projectId: "7", agentName: "prod-cluster" };
  const roundTrip = (answer: Parameters<typeof AGENT_INFO.encode>[0]) =>
    AGENT_INFO.decode(JSON.parse(JSON.stringify(AGENT_INFO.encode(answer))));

  test("an agent and a definitive refusal come back as they went in; a message is kept up to 500 characters", () => {
    expect(roundTrip({ value: info })).toEqual({ value: info });
    for (const code of ["unauthenticated", "permission_denied", "not_found"] as const) {
      const back = roundTrip({ error: new AgentAuthError(code, `refused: ${code}`) }) as {
        error: AgentAuthError;
      };
      expect([back.error.code, back.error.message]).toEqual([code, `refused: ${code}`]);
    }
    expect(AGENT_INFO.encode({ error: new AgentAuthError("not_found", "x".repeat(900)) })).toEqual({
      code: "not_found",
      message: "x".repeat(500),
    });
  });

  test.each([
    ["nothing", undefined],
    ["null", null],
    ["an empty object", {}],
    ["an agent that is null", { info: null }],
    ["an agent that is text", { info: "42" }],
    ["an agent whose id is a number", { info: { ...info, agentId: 42 } }],
    ["an agent without a name", { info: { agentId: "42", projectId: "7" } }],
    ["an unavailable refusal", { code: "unavailable", message: "GitLab is down" }],
    ["a refusal without a message", { code: "not_found" }],
  ])("%s (another version wrote it, or nothing valid) reads as no answer", (_, stored) => {
    expect(AGENT_INFO.decode(stored)).toBeUndefined();
  });
});
