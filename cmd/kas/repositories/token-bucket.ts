// An exact token bucket in process memory (golang.org/x/time/rate's semantics, which GitLab's kas
// uses for its Gitaly limits): `ratePerSecond` tokens a second, at most `burst` saved up. The
// library's fixed windows (kept for the Redis limits, which must live in Redis) can let through up
// to half as much again at full load; in process there is no reason to approximate.
import { RateLimiterRes } from "rate-limiter-flexible";
import type { PointLimiter, RateLimitSpec } from "./limiter.ts";

export class TokenBucketLimiter implements PointLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly spec: RateLimitSpec,
    private readonly now: () => number = performance.now.bind(performance),
  ) {}

  async consume(key: string): Promise<unknown> {
    const { ratePerSecond, burst } = this.spec;
    const now = this.now();
    const bucket = this.#buckets.get(key) ?? { tokens: burst, at: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * ratePerSecond);
    bucket.at = now;
    // Keys are few (the process, each Gitaly server): their state is kept.
    this.#buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return undefined;
    }
    const msBeforeNext = Math.ceil(((1 - bucket.tokens) / ratePerSecond) * 1000);
    throw new RateLimiterRes(0, msBeforeNext, 0, false);
  }
}
