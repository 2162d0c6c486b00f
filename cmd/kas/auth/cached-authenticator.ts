import { tokenDigest } from "../../../tool/agent-token.ts";
import { AnswerCache, type AnswerCacheOptions } from "../../../tool/gitlab/index.ts";
import { AgentAuthError } from "./errors.ts";
import type { SharedInfoCache } from "./shared-info-cache.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

/** agent.info_cache_ttl, agent.info_cache_error_ttl and the bound on entries. */
export type CacheOptions = AnswerCacheOptions & {
  /**
   * Answers shared with the other replicas (Redis), asked before GitLab. This process's cache then
   * only holds what this process got from GitLab itself (Redis's answers have their own expiry),
   * and answers for agents while Redis is down.
   */
  shared?: SharedInfoCache;
};

/**
 * Caches another authenticator's answers, keyed by the SHA-256 of the token (the token itself is
 * never stored), and shares one lookup among concurrent callers with the same token.
 * `unavailable` is never cached: when GitLab comes back, agents get in at once.
 */
export class CachedAuthenticator implements AgentAuthenticator {
  readonly #inner: AgentAuthenticator;
  readonly #cache: AnswerCache<AgentInfo, AgentAuthError>;
  readonly #shared: SharedInfoCache | undefined;
  readonly #ttlMs: number;
  readonly #errorTtlMs: number;
  /** Lookups in flight (Redis, then GitLab) by digest: concurrent callers share one. */
  readonly #inFlight = new Map<string, Promise<AgentInfo>>();

  constructor(inner: AgentAuthenticator, { shared, ...options }: CacheOptions = {}) {
    this.#inner = inner;
    this.#shared = shared;
    this.#ttlMs = options.ttlMs ?? 300_000;
    this.#errorTtlMs = options.errorTtlMs ?? 60_000;
    this.#cache = new AnswerCache((err) => {
      const error =
        err instanceof AgentAuthError
          ? err
          : new AgentAuthError("unavailable", "authentication failed", { cause: err });
      return { error, definitive: error.definitive };
    }, options);
  }

  get size(): number {
    return this.#cache.size;
  }

  authenticateAgent(token: string, options: AuthenticateOptions = {}): Promise<AgentInfo> {
    const key = tokenDigest(token).toString("base64");
    // Shared by every caller, so no single caller's signal may cancel it; the inner deadline bounds it.
    if (this.#shared === undefined)
      return this.#cache.get(key, () => this.#inner.authenticateAgent(token), options.signal);
    let flight = this.#inFlight.get(key);
    if (flight === undefined) {
      flight = this.#sharedLookup(this.#shared, token, key);
      this.#inFlight.set(key, flight);
      void flight.catch(() => {}).finally(() => this.#inFlight.delete(key));
    }
    return untilAborted(flight, options.signal);
  }

  /** Redis's answer; else this process's cache, or GitLab, whose answer goes to Redis. */
  async #sharedLookup(shared: SharedInfoCache, token: string, key: string): Promise<AgentInfo> {
    const answer = await shared.read(token);
    if (answer !== undefined) {
      if ("info" in answer) return answer.info;
      throw answer.error;
    }
    let asked = false;
    const ask = () => {
      asked = true;
      return this.#inner.authenticateAgent(token);
    };
    try {
      const info = await this.#cache.get(key, ask);
      // Only what GitLab just said goes to Redis: a local answer is older than a fresh TTL.
      if (asked) await shared.write(token, { info }, this.#ttlMs);
      return info;
    } catch (err) {
      if (asked && err instanceof AgentAuthError && err.definitive)
        await shared.write(token, { error: err }, this.#errorTtlMs);
      throw err;
    }
  }

  /** Forgets everything this process holds (e.g. after the GitLab secret changed); Redis's answers expire on their own. */
  clear(): void {
    this.#cache.clear();
  }
}

/** `promise`, or a rejection with the signal's reason once it aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
