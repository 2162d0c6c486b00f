// The in-process token bucket: `burst` at once, then exactly `ratePerSecond`, as GitLab's kas
// (golang.org/x/time/rate), whatever the load.
import fc from "fast-check";
import { RateLimiterRes } from "rate-limiter-flexible";
import { describe, expect, test } from "vitest";
import { TokenBucketLimiter } from "../../../cmd/kas/repositories/token-bucket.ts";

async function allowed(limiter: TokenBucketLimiter, key = "k"): Promise<number | true> {
  try {
    await limiter.consume(key);
    return true;
  } catch (err) {
    expect(err).toBeInstanceOf(RateLimiterRes);
    return (err as RateLimiterRes).msBeforeNext;
  }
}

describe("token bucket", () => {
  test("a full bucket's burst at once, then one call per 1/rate, with the wait to the next token", async () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ ratePerSecond: 30, burst: 70 }, () => now);
    for (let i = 0; i < 70; i++) expect(await allowed(limiter)).toBe(true);
    expect(await allowed(limiter)).toBe(34); // 1/30 s
    now += 34;
    expect(await allowed(limiter)).toBe(true);
    expect(await allowed(limiter, "other")).toBe(true); // keys are separate
  });

  test("under any load pattern, calls allowed over a span never exceed burst + rate x span", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.double({ min: 0.5, max: 50, noNaN: true }),
        fc.integer({ min: 1, max: 80 }),
        fc.array(fc.integer({ min: 0, max: 200 }), { minLength: 1, maxLength: 300 }),
        async (rate, burst, gaps) => {
          let now = 0;
          const limiter = new TokenBucketLimiter({ ratePerSecond: rate, burst }, () => now);
          let passed = 0;
          for (const gap of gaps) {
            now += gap;
            if ((await allowed(limiter)) === true) passed++;
          }
          expect(passed).toBeLessThanOrEqual(burst + Math.floor((rate * now) / 1000) + 1e-9);
        },
      ),
    );
  });
});
