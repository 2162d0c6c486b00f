import type { KasRedis } from "../../../../modules/runtime/index.ts";

const MINUTE_MS = 60_000;
/**
 * Tokens counted by this process in one minute. Attempts are counted before authentication (a
 * flood with one token, valid or not, must not reach GitLab at each attempt), so the tokens are
 * the client's choice: past this bound the oldest count is forgotten rather than memory grown.
 */
const MAX_LOCAL_TOKENS = 100_000;

export interface RateVerdict {
  allowed: boolean;
  /** Attempts with this token in the current minute, this one included. */
  count: number;
  /** Seconds until the minute ends and the count starts over. */
  retryAfterS: number;
}

export interface ConnectionRateOptions {
  limitPerMinute: number;
  /** Counts across replicas; without it, in this process. */
  redis?: KasRedis;
  /** Redis could not count: this attempt was counted in this process instead. */
  onFallback?: (err: Error) => void;
  now?: () => number;
}

/**
 * Connection attempts per token per UTC minute, as GitLab's kas counts them (`TokenLimiter`: a
 * Redis INCR on a per-token, per-minute key that expires). Here the INCR comes first and its
 * answer decides, so two replicas can never both let the limit's last attempt through.
 *
 * Redis down: counted in this process (the limit then holds per replica). GitLab's kas refuses
 * every attempt when Redis errs, which turns a Redis blip into every agent cut off; not counting
 * at all would leave no limit. A per-process count keeps a bound and keeps agents connecting.
 */
export class ConnectionRate {
  readonly #limit: number;
  readonly #redis: KasRedis | undefined;
  readonly #onFallback: ((err: Error) => void) | undefined;
  readonly #now: () => number;
  /** This process's counts for `#minute`. */
  readonly #local = new Map<string, number>();
  #minute = 0;

  constructor(o: ConnectionRateOptions) {
    this.#limit = o.limitPerMinute;
    this.#redis = o.redis;
    this.#onFallback = o.onFallback;
    this.#now = o.now ?? Date.now;
  }

  /** Counts one attempt with the token named `key` and says whether it is within the limit. */
  async take(key: string): Promise<RateVerdict> {
    const now = this.#now();
    const minute = Math.floor(now / MINUTE_MS);
    const retryAfterS = Math.max(1, Math.ceil(((minute + 1) * MINUTE_MS - now) / 1000));
    let count: number;
    try {
      count = await this.#shared(key, minute);
    } catch (err) {
      this.#onFallback?.(err as Error);
      count = this.#counted(key, minute);
    }
    return { allowed: count <= this.#limit, count, retryAfterS };
  }

  async #shared(key: string, minute: number): Promise<number> {
    const redis = this.#redis;
    if (redis === undefined) return this.#counted(key, minute);
    if (redis.client.status !== "ready") throw new Error(`Redis connection is ${redis.client.status}`);
    const replies = await redis.client
      .multi()
      .incr(`${redis.keyPrefix}agent_limit:${key}:${minute}`)
      // The key names its minute, so it is dead once the minute is over: a minute past that.
      .pexpire(`${redis.keyPrefix}agent_limit:${key}:${minute}`, 2 * MINUTE_MS)
      .exec();
    const [err, count] = replies?.[0] ?? [new Error("Redis transaction discarded")];
    if (err) throw err;
    return Number(count);
  }

  #counted(key: string, minute: number): number {
    if (minute !== this.#minute) {
      this.#local.clear();
      this.#minute = minute;
    }
    const count = (this.#local.get(key) ?? 0) + 1;
    if (!this.#local.has(key) && this.#local.size >= MAX_LOCAL_TOKENS) {
      this.#local.delete(this.#local.keys().next().value as string);
    }
    this.#local.set(key, count);
    return count;
  }
}
