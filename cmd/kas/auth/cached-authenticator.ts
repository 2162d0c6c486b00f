import { tokenDigest } from "../../../tool/agent-token.ts";
import { AnswerCache, type AnswerCacheOptions } from "../../../tool/gitlab/index.ts";
import { AgentAuthError, type AgentAuthErrorCode } from "./errors.ts";
import type { SharedAnswerCache, SharedAnswerKind } from "./shared-answer-cache.ts";
import { outcomeKind, SharedLookups, type SharedOutcome } from "./shared-lookups.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

/** agent.info_cache_ttl, agent.info_cache_error_ttl and the bound on entries. */
export type CacheOptions = AnswerCacheOptions & {
  /**
   * Answers shared with the other replicas (Redis), asked before GitLab. This process's cache then
   * only holds what this process got from GitLab itself (Redis's answers have their own expiry),
   * and answers for agents while Redis is down.
   */
  shared?: SharedAnswerCache;
};

const DEFINITIVE: ReadonlySet<string> = new Set<AgentAuthErrorCode>([
  "unauthenticated",
  "permission_denied",
  "not_found",
]);

/** agent_info as Redis holds it (under the token's SHA-256): who the token is, or a definitive refusal. */
export const AGENT_INFO: SharedAnswerKind<SharedOutcome<AgentInfo, AgentAuthError>> = outcomeKind({
  name: "agent_info",
  valueKey: "info",
  isValue: (info) => [info.agentId, info.projectId, info.agentName].every((v) => typeof v === "string"),
  refusal: (code, message) =>
    DEFINITIVE.has(code) ? new AgentAuthError(code as AgentAuthErrorCode, message) : undefined,
  maxMessage: 500,
});

/**
 * Caches another authenticator's answers, keyed by the SHA-256 of the token (the token itself is
 * never stored), and shares one lookup among concurrent callers with the same token.
 * `unavailable` is never cached: when GitLab comes back, agents get in at once.
 */
export class CachedAuthenticator implements AgentAuthenticator {
  readonly #inner: AgentAuthenticator;
  readonly #cache: AnswerCache<AgentInfo, AgentAuthError>;
  readonly #shared: SharedLookups<AgentInfo, AgentAuthError> | undefined;

  constructor(inner: AgentAuthenticator, { shared, ...options }: CacheOptions = {}) {
    this.#inner = inner;
    this.#cache = new AnswerCache((err) => {
      const error = AgentAuthError.from(err);
      return { error, definitive: error.definitive };
    }, options);
    this.#shared =
      shared &&
      new SharedLookups({
        shared,
        kind: AGENT_INFO,
        local: this.#cache,
        ttlMs: options.ttlMs ?? 300_000,
        errorTtlMs: options.errorTtlMs ?? 60_000,
        definitive: (err): err is AgentAuthError => err instanceof AgentAuthError && err.definitive,
      });
  }

  get size(): number {
    return this.#cache.size;
  }

  authenticateAgent(token: string, options: AuthenticateOptions = {}): Promise<AgentInfo> {
    const key = tokenDigest(token).toString("base64");
    // Shared by every caller, so no single caller's signal may cancel it; the inner deadline bounds it.
    const ask = () => this.#inner.authenticateAgent(token);
    return this.#shared === undefined
      ? this.#cache.get(key, ask, options.signal)
      : this.#shared.get(key, token, "", ask, options.signal);
  }

  /** Forgets everything this process holds (e.g. after the GitLab secret changed); Redis's answers expire on their own. */
  clear(): void {
    this.#cache.clear();
  }
}
