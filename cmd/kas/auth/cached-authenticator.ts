import { tokenDigest } from "../../common/agent-token.ts";
import { AgentAuthError } from "./errors.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

export interface CacheOptions {
  /** How long a successful answer is reused. Default 5 min (agent.info_cache_ttl). */
  ttlMs?: number;
  /** How long a definitive refusal (401/403/404) is reused. Default 1 min (agent.info_cache_error_ttl). */
  errorTtlMs?: number;
  /** Entries kept at most; the least recently used go first. Default 10 000. */
  maxEntries?: number;
  /** Current time in ms. Default `Date.now`; tests pass a fake clock. */
  now?: () => number;
}

type Outcome = { info: AgentInfo } | { error: AgentAuthError };

interface Entry {
  outcome: Outcome;
  expiresAt: number;
}

/**
 * Caches another authenticator's answers, keyed by the SHA-256 of the token (the token itself is
 * never stored), and shares one lookup among concurrent callers with the same token.
 * `unavailable` is never cached: when GitLab comes back, agents get in at once.
 */
export class CachedAuthenticator implements AgentAuthenticator {
  readonly #inner: AgentAuthenticator;
  readonly #ttlMs: number;
  readonly #errorTtlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  /** Insertion order is recency order: a hit is moved to the end. */
  readonly #entries = new Map<string, Entry>();
  readonly #inFlight = new Map<string, Promise<Outcome>>();

  constructor(inner: AgentAuthenticator, options: CacheOptions = {}) {
    this.#inner = inner;
    this.#ttlMs = options.ttlMs ?? 300_000;
    this.#errorTtlMs = options.errorTtlMs ?? 60_000;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#now = options.now ?? Date.now;
    if (!(this.#maxEntries >= 1)) throw new RangeError("CachedAuthenticator: maxEntries must be >= 1");
  }

  get size(): number {
    return this.#entries.size;
  }

  async authenticateAgent(token: string, options: AuthenticateOptions = {}): Promise<AgentInfo> {
    const key = tokenDigest(token).toString("base64");
    const cached = this.#lookup(key);
    const outcome = await (cached ?? this.#wait(this.#fetch(key, token), options.signal));
    if ("error" in outcome) throw outcome.error;
    return outcome.info;
  }

  /** Forgets everything (e.g. after the GitLab secret changed). */
  clear(): void {
    this.#entries.clear();
  }

  #lookup(key: string): Outcome | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    if (entry.expiresAt <= this.#now()) return undefined;
    this.#entries.set(key, entry);
    return entry.outcome;
  }

  #fetch(key: string, token: string): Promise<Outcome> {
    let flight = this.#inFlight.get(key);
    if (flight === undefined) {
      // Shared by every caller, so no single caller's signal may cancel it; the inner deadline bounds it.
      flight = this.#inner.authenticateAgent(token).then(
        (info) => this.#store(key, { info }, this.#ttlMs),
        (err: unknown) => {
          const error =
            err instanceof AgentAuthError
              ? err
              : new AgentAuthError("unavailable", "authentication failed", { cause: err });
          return error.definitive ? this.#store(key, { error }, this.#errorTtlMs) : { error };
        },
      );
      this.#inFlight.set(key, flight);
      void flight.finally(() => this.#inFlight.delete(key));
    }
    return flight;
  }

  #store(key: string, outcome: Outcome, ttlMs: number): Outcome {
    this.#entries.delete(key);
    this.#entries.set(key, { outcome, expiresAt: this.#now() + ttlMs });
    while (this.#entries.size > this.#maxEntries) {
      this.#entries.delete(this.#entries.keys().next().value!);
    }
    return outcome;
  }

  #wait(flight: Promise<Outcome>, signal: AbortSignal | undefined): Promise<Outcome> {
    if (signal === undefined) return flight;
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      flight.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }
}
