import { tokenDigest } from "../../../tool/agent-token.ts";
import { AnswerCache, type AnswerCacheOptions } from "../../../tool/gitlab/index.ts";
import { AgentAuthError } from "./errors.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

/** agent.info_cache_ttl, agent.info_cache_error_ttl and the bound on entries. */
export type CacheOptions = AnswerCacheOptions;

/**
 * Caches another authenticator's answers, keyed by the SHA-256 of the token (the token itself is
 * never stored), and shares one lookup among concurrent callers with the same token.
 * `unavailable` is never cached: when GitLab comes back, agents get in at once.
 */
export class CachedAuthenticator implements AgentAuthenticator {
  readonly #inner: AgentAuthenticator;
  readonly #cache: AnswerCache<AgentInfo, AgentAuthError>;

  constructor(inner: AgentAuthenticator, options: CacheOptions = {}) {
    this.#inner = inner;
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
    // Shared by every caller, so no single caller's signal may cancel it; the inner deadline bounds it.
    return this.#cache.get(
      tokenDigest(token).toString("base64"),
      () => this.#inner.authenticateAgent(token),
      options.signal,
    );
  }

  /** Forgets everything (e.g. after the GitLab secret changed). */
  clear(): void {
    this.#cache.clear();
  }
}
