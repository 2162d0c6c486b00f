// What a rate limit is (a rate and a burst) and what enforces one: the in-process token bucket and
// the Redis windows of rate-limits.ts both implement PointLimiter.

/** A token bucket: `ratePerSecond` tokens refilled per second, at most `burst` at once. */
export interface RateLimitSpec {
  readonly ratePerSecond: number;
  readonly burst: number;
}

/** What the FIFO waiter needs of a limiter: rejects with a RateLimiterRes when limited, an Error when its store fails. */
export interface PointLimiter {
  consume(key: string): Promise<unknown>;
}
