// GitLab's answers, cached: agent authentication (`agent_info`), project access (`project_info`),
// the Kubernetes API proxy's callers (`allowed_agents`, `authorize_proxy_user`). Keys are never
// credentials (callers key by a digest).

export interface AnswerCacheOptions {
  /** How long an answer is reused. Default 5 min. */
  ttlMs?: number;
  /** How long a definitive refusal (401/403/404) is reused. Default 1 min. */
  errorTtlMs?: number;
  /** Entries kept at most; the least recently used go first. Default 10 000. */
  maxEntries?: number;
  /** Current time in ms. Default `Date.now`; tests pass a fake clock. */
  now?: () => number;
}

type Outcome<V, E> = { value: V } | { error: E };

/**
 * Answers and definitive refusals of a slow lookup, by key, least recently used first out.
 * Concurrent callers of one key share one lookup; a refusal that is not definitive (GitLab
 * unreachable) is never cached, so when GitLab comes back the next caller asks again.
 */
export class AnswerCache<V, E extends Error> {
  readonly #ttlMs: number;
  readonly #errorTtlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  /** Insertion order is recency order: a hit is moved to the end. */
  readonly #entries = new Map<string, { outcome: Outcome<V, E>; expiresAt: number }>();
  readonly #inFlight = new Map<string, Promise<Outcome<V, E>>>();

  /** `refusal` turns what a lookup threw into the error callers get, and says whether to cache it. */
  constructor(
    private readonly refusal: (err: unknown) => { error: E; definitive: boolean },
    options: AnswerCacheOptions = {},
  ) {
    this.#ttlMs = options.ttlMs ?? 300_000;
    this.#errorTtlMs = options.errorTtlMs ?? 60_000;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#now = options.now ?? Date.now;
    if (!(this.#maxEntries >= 1)) throw new RangeError("maxEntries must be >= 1");
  }

  get size(): number {
    return this.#entries.size;
  }

  clear(): void {
    this.#entries.clear();
  }

  /**
   * The answer for `key`: cached, or from `lookup` (shared with concurrent callers of the key, so
   * no single caller's `signal` cancels it; `signal` only stops this caller's wait). Throws the
   * refusal. `signal` may be a function that makes it: called only when there is a wait to stop,
   * so a caller answered from the cache never pays for an AbortSignal.
   */
  async get(key: string, lookup: () => Promise<V>, signal?: LazySignal): Promise<V> {
    const outcome = await (this.#cached(key) ??
      untilAborted(this.#fetch(key, lookup), signal === undefined ? undefined : signalOf(signal)));
    if ("error" in outcome) throw outcome.error;
    return outcome.value;
  }

  #cached(key: string): Outcome<V, E> | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    if (entry.expiresAt <= this.#now()) return undefined;
    this.#entries.set(key, entry);
    return entry.outcome;
  }

  #fetch(key: string, lookup: () => Promise<V>): Promise<Outcome<V, E>> {
    let flight = this.#inFlight.get(key);
    if (flight === undefined) {
      flight = lookup().then(
        (value) => this.#store(key, { value }, this.#ttlMs),
        (err: unknown) => {
          const { error, definitive } = this.refusal(err);
          return definitive ? this.#store(key, { error }, this.#errorTtlMs) : { error };
        },
      );
      this.#inFlight.set(key, flight);
      void flight.finally(() => this.#inFlight.delete(key));
    }
    return flight;
  }

  #store(key: string, outcome: Outcome<V, E>, ttlMs: number): Outcome<V, E> {
    this.#entries.delete(key);
    this.#entries.set(key, { outcome, expiresAt: this.#now() + ttlMs });
    while (this.#entries.size > this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    return outcome;
  }
}

/** `promise`, or a rejection with the signal's reason once it aborts (the promise itself goes on). */
/** An AbortSignal, or a function that makes one: called only when there is a wait to stop. */
export type LazySignal = AbortSignal | (() => AbortSignal);

/** The signal of `lazy`, made now if it is a function. */
export function signalOf(lazy: LazySignal): AbortSignal {
  return typeof lazy === "function" ? lazy() : lazy;
}

export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
