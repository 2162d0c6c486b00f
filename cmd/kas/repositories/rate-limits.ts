// The limits kas keeps toward Gitaly, their defaults, and how a token bucket (refill rate + bucket
// size, as GitLab's kas configures `gitaly.global_api_rate_limit` / `per_server_api_rate_limit`) is
// kept: exactly in process memory, and for the limits shared through Redis with rate-limiter-flexible,
// whose limiters count points in fixed windows.
import { BurstyRateLimiter, type RateLimiterAbstract, RateLimiterRedis } from "rate-limiter-flexible";
import type { PointLimiter, RateLimitSpec } from "./limiter.ts";
import { TokenBucketLimiter } from "./token-bucket.ts";

export type { PointLimiter, RateLimitSpec } from "./limiter.ts";

/**
 * Defaults. The process ones are GitLab kas's (`refill_rate_per_second` / `bucket_size`). The Redis
 * ones are ours: per agent 1/s with a burst of 10 lets a config poll (ref + file) run every few
 * seconds and a GitOps sync of a dozen files go through at once, while one agent cannot take more
 * than a couple of calls a second from all replicas together; cluster-wide 100/s burst 200 lets
 * three replicas run at their process limit, and caps Gitaly's load however many replicas run.
 */
export const DEFAULT_GITALY_RATE_LIMITS = {
  processGlobal: { ratePerSecond: 30, burst: 70 },
  perServer: { ratePerSecond: 15, burst: 40 },
  perAgent: { ratePerSecond: 1, burst: 10 },
  clusterGlobal: { ratePerSecond: 100, burst: 200 },
} as const satisfies Record<string, RateLimitSpec>;

/** Fixed windows (whole seconds: the Redis limiter expires keys in seconds) for one token bucket. */
export interface Windows {
  /** The steady rate: `points` per `durationSec`. */
  readonly rate: { readonly points: number; readonly durationSec: number };
  /** The burst on top of it, when the bucket holds more than one rate window's points. */
  readonly burst?: { readonly points: number; readonly durationSec: number };
}

/**
 * Token bucket -> BurstyRateLimiter's two fixed windows (the Redis limits):
 * - rate: `ratePerSecond * W` points per W seconds, W the smallest whole number of seconds (up to
 *   60) that makes the points whole (1 s for whole rates; 0.5/s -> 1 point per 2 s);
 * - burst: the rest of the bucket (`burst - rate points`) per `ceil(burst / ratePerSecond)`
 *   seconds, the time a token bucket takes to refill from empty.
 * So a client gets `burst` calls at once, then the steady rate, as from a token bucket, and an idle
 * one has its burst back after a bucket's refill time. Unlike a token bucket the burst window
 * refills even when the client keeps calling at the steady rate: the sustained worst case is
 * `rate + (burst - rate) / ceil(burst / rate)` per second (defaults: 43/s process-wide, 23/s per
 * server, 1.9/s per agent, 150/s cluster-wide), and a window boundary can pass a rate window
 * twice in quick succession. A bucket smaller than one rate window caps the rate at the bucket.
 */
export function toWindows(spec: RateLimitSpec): Windows {
  const { ratePerSecond: r, burst: b } = spec;
  if (!(Number.isFinite(r) && r > 0)) throw new RangeError(`ratePerSecond must be > 0: ${r}`);
  if (!(Number.isInteger(b) && b >= 1)) throw new RangeError(`burst must be a whole number >= 1: ${b}`);
  let w = 1;
  while (w < 60 && Math.abs(r * w - Math.round(r * w)) > 1e-9) w++;
  const exact = Math.abs(r * w - Math.round(r * w)) <= 1e-9;
  if (!exact) w = Math.max(1, Math.ceil(1 / r));
  const points = Math.min(b, Math.max(1, exact ? Math.round(r * w) : Math.floor(r * w)));
  const rest = b - points;
  return {
    rate: { points, durationSec: w },
    ...(rest > 0 && { burst: { points: rest, durationSec: Math.max(1, Math.ceil(b / r)) } }),
  };
}

/** In process memory, or in Redis (ioredis) with a bound on each Redis call. */
export type LimiterStore =
  | { readonly memory: true }
  | { readonly redis: unknown; readonly timeoutMs: number };

/**
 * A limiter for `spec`: an exact token bucket in process memory, or fixed windows in Redis
 * (ioredis: the library drives it with a Lua script defined on the client; `useRedisPackage` is
 * for the `redis` package and stays off).
 */
export function createLimiter(spec: RateLimitSpec, store: LimiterStore, keyPrefix: string): PointLimiter {
  if ("memory" in store) return new TokenBucketLimiter(spec);
  const windows = toWindows(spec);
  const make = (points: number, duration: number, prefix: string): RateLimiterAbstract => {
    const opts = { points, duration, keyPrefix: prefix };
    // Not ready (reconnecting) -> fail at once rather than sit in ioredis's offline queue.
    return new RateLimiterRedis({ ...opts, storeClient: store.redis, rejectIfRedisNotReady: true });
  };
  const rate = make(windows.rate.points, windows.rate.durationSec, keyPrefix);
  const limiter = windows.burst
    ? new BurstyRateLimiter(rate, make(windows.burst.points, windows.burst.durationSec, `${keyPrefix}:burst`))
    : rate;
  return withTimeout(limiter, store.timeoutMs);
}

// A Redis that accepts connections but does not answer must not hold calls: past the bound the
// call counts as a Redis failure. (RLWrapperTimeouts does this for one limiter, not a Bursty pair.)
function withTimeout(limiter: PointLimiter, ms: number): PointLimiter {
  return {
    consume(key) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis rate limiter did not answer within ${ms} ms`)), ms);
      });
      return Promise.race([limiter.consume(key), timeout]).finally(() => clearTimeout(timer));
    },
  };
}
