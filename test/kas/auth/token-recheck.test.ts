import { EventEmitter, once } from "node:events";
import { Agent } from "undici";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  AgentAuthError,
  type AgentAuthErrorCode,
  AgentToken,
  GitLabAuthenticator,
  MIN_RECHECK_INTERVAL_MS,
  TokenRecheck,
} from "../../../cmd/kas/auth/index.ts";
import { AGENT, memoryLogger, startGitLab, TOKEN } from "./helpers.ts";

const TOKEN_43 = "glagent-Hd3mP8qT1vX6zB4nK9wR2sL7";
const TOKEN_44 = "glagent-Ja5rW2eY7uI0oP3aS6dF9gH1";
const INTERVAL = 300_000;
/** The latest a re-check comes: the interval and its 10 % jitter. */
const PERIOD = INTERVAL * 1.1;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A TokenRecheck over the real GitLab authenticator, without the cache, against the GitLab test
 * server, on a fake clock (timers and Date; the HTTP exchange itself runs for real).
 */
async function setup(intervalMs = INTERVAL) {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  const { api, secret } = await startGitLab({
    [TOKEN]: AGENT,
    [TOKEN_43]: { agentId: 43, projectId: 7, agentName: "staging" },
    [TOKEN_44]: { agentId: 44, projectId: 7, agentName: "qa" },
  });
  // undici's own timeouts would run on the fake clock, which jumps while a request is on the wire;
  // each attempt stays bounded by the authenticator's request timeout (AbortSignal.timeout, real time).
  const dispatcher = new Agent({ headersTimeout: 0, bodyTimeout: 0, connectTimeout: 0 });
  const gitlab = new GitLabAuthenticator({ gitlabUrl: api.url, secret, maxAttempts: 1, dispatcher });
  const results: ("ok" | AgentAuthErrorCode)[] = [];
  const events = new EventEmitter();
  const { log, text } = memoryLogger();
  let lookups = 0; // counted when asked, before any I/O
  const recheck = new TokenRecheck({
    authenticator: {
      authenticateAgent: (token, options) => {
        lookups++;
        return gitlab.authenticateAgent(token, options);
      },
    },
    intervalMs,
    onResult: (result) => {
      results.push(result);
      events.emit("result");
    },
    log,
  });
  cleanups.push(
    () => api.close(),
    () => dispatcher.close(),
    () => recheck.destroy(),
  );
  /** Resolves once `n` re-checks have finished (the clock does not move meanwhile). */
  const finished = async (n: number) => {
    while (results.length < n) await once(events, "result", { signal: AbortSignal.timeout(5000) });
  };
  /**
   * Moves the fake clock a second at a time until `n` re-checks have finished, holding it still
   * while one is on the wire: the JWT kas signs for GitLab lives 30 s of this clock, and a jump past
   * that while the request travels would have GitLab's side refuse it as expired.
   */
  const rounds = async (n: number) => {
    for (let steps = 0; results.length < n; steps++) {
      if (steps > (2 * PERIOD) / 1000)
        throw new Error(`only ${results.length} of ${n} re-checks in two periods`);
      if (lookups > results.length) await once(events, "result", { signal: AbortSignal.timeout(5000) });
      else await vi.advanceTimersByTimeAsync(1000);
    }
  };
  /** Each holder's refusals. */
  const holder = (token: string) => {
    const refusals: AgentAuthError[] = [];
    const unwatch = recheck.watch(new AgentToken(token), (e) => refusals.push(e));
    return { refusals, unwatch };
  };
  const tokensAsked = () => api.requests.map((r) => r.agentToken).sort();
  return { api, recheck, results, finished, rounds, holder, lookups: () => lookups, log: text, tokensAsked };
}

describe("TokenRecheck", () => {
  test("holders of one token share one re-check: one agent_info call per token per interval", async () => {
    const { api, results, rounds, holder, tokensAsked } = await setup();
    const tunnels = [holder(TOKEN), holder(TOKEN), holder(TOKEN_43)];
    await rounds(2);
    expect(api.agentInfoRequests).toBe(2);
    expect(tokensAsked()).toEqual([TOKEN_43, TOKEN].sort());
    await rounds(4);
    expect(api.agentInfoRequests).toBe(4);
    expect(results).toEqual(["ok", "ok", "ok", "ok"]);
    expect(tunnels.flatMap((t) => t.refusals)).toEqual([]);
  });

  test("a token GitLab refuses (401, 403, 404): every holder is told once, with the code; no more re-checks", async () => {
    const { api, recheck, results, rounds, holder, lookups } = await setup();
    const revoked = { [TOKEN]: [holder(TOKEN), holder(TOKEN)], [TOKEN_43]: [holder(TOKEN_43)] };
    const forbidden = holder(TOKEN_44);
    api.removeAgent(TOKEN);
    api.refuse(TOKEN_43, 404);
    api.refuse(TOKEN_44, 403);
    await rounds(3);
    expect(results.sort()).toEqual(["not_found", "permission_denied", "unauthenticated"]);
    for (const h of revoked[TOKEN]!) expect(h.refusals.map((e) => e.code)).toEqual(["unauthenticated"]);
    for (const h of revoked[TOKEN_43]!) expect(h.refusals.map((e) => e.code)).toEqual(["not_found"]);
    expect(forbidden.refusals.map((e) => e.code)).toEqual(["permission_denied"]);
    expect(recheck.size).toBe(0);
    await vi.advanceTimersByTimeAsync(PERIOD);
    expect(lookups()).toBe(3);
  });

  test("GitLab failing (500) is no refusal: the holders keep their tunnels, and the token is asked again an interval later", async () => {
    const { api, recheck, results, rounds, holder, log } = await setup();
    const tunnel = holder(TOKEN);
    api.failNext({ status: 500 });
    await rounds(1);
    expect(results).toEqual(["unavailable"]);
    expect(tunnel.refusals).toEqual([]);
    expect(recheck.size).toBe(1);
    expect(log()).toContain("agent token: re-check failed; its tunnels stay");
    expect(log()).not.toContain(TOKEN);
    await rounds(2);
    expect(results).toEqual(["unavailable", "ok"]);
    expect(api.agentInfoRequests).toBe(2);
    expect(tunnel.refusals).toEqual([]);
  });

  test("once the last holder of a token leaves, its re-checks stop", async () => {
    const { recheck, holder, lookups } = await setup();
    const [a, b] = [holder(TOKEN), holder(TOKEN)];
    a.unwatch();
    a.unwatch(); // idempotent: b still holds the token
    expect(recheck.size).toBe(1);
    b.unwatch();
    expect(recheck.size).toBe(0);
    await vi.advanceTimersByTimeAsync(2 * PERIOD);
    expect(lookups()).toBe(0);
  });

  test(`an interval below ${MIN_RECHECK_INTERVAL_MS} ms (a cache TTL of 0) is raised to it: no tight loop`, async () => {
    const { finished, holder, lookups } = await setup(0);
    holder(TOKEN);
    await vi.advanceTimersByTimeAsync(MIN_RECHECK_INTERVAL_MS - 1);
    expect(lookups()).toBe(0);
    await vi.advanceTimersByTimeAsync(MIN_RECHECK_INTERVAL_MS * 0.1 + 1);
    expect(lookups()).toBe(1);
    await finished(1);
  });
});

describe("TokenRecheck with an authenticator that answers as told", () => {
  type Answer = { resolve: () => void; reject: (e: unknown) => void; signal: AbortSignal | undefined };

  /** Each lookup waits for the test to answer it. */
  function setupManual() {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const pending: Answer[] = [];
    const results: string[] = [];
    const { log, text } = memoryLogger();
    const recheck = new TokenRecheck({
      authenticator: {
        authenticateAgent: (_token, options) =>
          new Promise((resolve, reject) => {
            pending.push({
              resolve: () => resolve({ ...AGENT, agentId: "42", projectId: "7" }),
              reject,
              signal: options?.signal,
            });
          }),
      },
      intervalMs: 1000,
      onResult: (r) => results.push(r),
      log,
    });
    cleanups.push(() => recheck.destroy());
    const holder = (token: string) => {
      const refusals: AgentAuthError[] = [];
      const unwatch = recheck.watch(new AgentToken(token), (e) => refusals.push(e));
      return { refusals, unwatch };
    };
    /** Past the latest a re-check can come (interval and jitter). */
    const period = () => vi.advanceTimersByTimeAsync(1101);
    return { recheck, pending, results, holder, period, log: text };
  }

  test("a failure that is no AgentAuthError: unavailable, logged with the token's fingerprint, and asked again", async () => {
    const { recheck, pending, results, holder, period, log } = setupManual();
    const tunnel = holder(TOKEN);
    holder(TOKEN);
    await period();
    expect(pending).toHaveLength(1);
    pending[0]!.reject(new TypeError("fetch failed"));
    await vi.advanceTimersByTimeAsync(0);
    expect(results).toEqual(["unavailable"]);
    expect(tunnel.refusals).toEqual([]);
    expect(recheck.size).toBe(1);
    const line = JSON.parse(log().trim().split("\n").at(-1)!) as Record<string, unknown>;
    expect(line).toMatchObject({
      tokenFingerprint: new AgentToken(TOKEN).fingerprint,
      reason: "authentication failed",
      cause: "TypeError: fetch failed", // what went wrong underneath, not just that it did
      tunnels: 2,
      msg: "agent token: re-check failed; its tunnels stay, asked about again later",
    });
    await period();
    expect(pending).toHaveLength(2);
  });

  test("an answer is not logged, and the token is asked again", async () => {
    const { pending, results, holder, period, log } = setupManual();
    holder(TOKEN);
    await period();
    pending[0]!.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(results).toEqual(["ok"]);
    expect(log()).toBe("");
    await period();
    expect(pending).toHaveLength(2);
  });

  test("without onResult and log, re-checks go on after an answer and after a failure", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const pending: Answer[] = [];
    const recheck = new TokenRecheck({
      authenticator: {
        authenticateAgent: (_token, options) =>
          new Promise((resolve, reject) => {
            const answer = () => resolve({ ...AGENT, agentId: "42", projectId: "7" });
            pending.push({ resolve: answer, reject, signal: options?.signal });
          }),
      },
      intervalMs: 1000,
    });
    cleanups.push(() => recheck.destroy());
    const refusals: AgentAuthError[] = [];
    recheck.watch(new AgentToken(TOKEN), (e) => refusals.push(e));
    await vi.advanceTimersByTimeAsync(1101);
    pending[0]!.resolve();
    await vi.advanceTimersByTimeAsync(1101);
    expect(pending).toHaveLength(2);
    pending[1]!.reject(new AgentAuthError("unavailable", "GitLab answered HTTP 500"));
    await vi.advanceTimersByTimeAsync(1101);
    expect(pending).toHaveLength(3);
    expect(refusals).toEqual([]);
  });

  test("stopping aborts the re-checks in flight, reports nothing, and watches nothing after", async () => {
    const { recheck, pending, results, holder, period } = setupManual();
    const tunnel = holder(TOKEN);
    await period();
    expect(pending[0]!.signal?.aborted).toBe(false);
    recheck.destroy();
    expect(pending[0]!.signal?.aborted).toBe(true);
    pending[0]!.reject(new AgentAuthError("unauthenticated", "revoked"));
    await vi.advanceTimersByTimeAsync(0);
    expect(results).toEqual([]);
    expect(tunnel.refusals).toEqual([]);
    holder(TOKEN).unwatch();
    holder(TOKEN_43);
    expect(recheck.size).toBe(0);
    await period();
    expect(pending).toHaveLength(1);
  });

  test("every holder gone while its re-check is in flight: its answer is dropped", async () => {
    const { recheck, pending, results, holder, period } = setupManual();
    const tunnel = holder(TOKEN);
    await period();
    tunnel.unwatch();
    pending[0]!.reject(new AgentAuthError("unauthenticated", "revoked"));
    await vi.advanceTimersByTimeAsync(0);
    expect(results).toEqual([]);
    expect(tunnel.refusals).toEqual([]);
    expect(recheck.size).toBe(0);
  });

  test("a token watched again after its refusal, before the refused tunnels let go, stays watched", async () => {
    const { recheck, pending, holder, period } = setupManual();
    const old = holder(TOKEN);
    await period();
    pending[0]!.reject(new AgentAuthError("unauthenticated", "revoked"));
    await vi.advanceTimersByTimeAsync(0);
    expect(old.refusals.map((e) => e.code)).toEqual(["unauthenticated"]);
    expect(recheck.size).toBe(0);
    const fresh = holder(TOKEN); // e.g. the agent reconnected with a token GitLab accepts again
    old.unwatch(); // the refused tunnel closes only now
    expect(recheck.size).toBe(1);
    await period();
    expect(pending).toHaveLength(2);
    fresh.unwatch();
  });

  test("re-checks in flight all listen on the one stop signal: 20 of them raise no listener warning", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    cleanups.push(() => process.off("warning", onWarning));
    const { pending, holder, period } = setupManual();
    for (let i = 0; i < 20; i++) holder(`glagent-many-${i}-Qw8eR5tY2uI9`);
    await period();
    expect(pending).toHaveLength(20);
    for (const p of pending) p.signal!.addEventListener("abort", () => {});
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
  });
});
