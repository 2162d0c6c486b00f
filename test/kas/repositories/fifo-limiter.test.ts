// The FIFO line in front of a rate limiter, on rate-limiter-flexible's memory limiter.
import { RateLimiterMemory } from "rate-limiter-flexible";
import { describe, expect, it } from "vitest";
import { FifoLimiter } from "../../../cmd/kas/repositories/fifo-limiter.ts";
import type { PointLimiter } from "../../../cmd/kas/repositories/rate-limits.ts";

describe("FIFO rate limiter line", () => {
  it("serves waiters in arrival order, per key, and forgets a key once its line is empty", async () => {
    const line = new FifoLimiter(new RateLimiterMemory({ points: 2, duration: 1 }));
    const order: string[] = [];
    let waited = 0;
    const take = (key: string, n: number) =>
      line.take(key, undefined, () => waited++).then(() => order.push(`${key}${n}`));
    const all = [1, 2, 3, 4, 5].map((n) => take("a", n));
    await take("b", 1); // another key is not held up by a's line
    expect(order).toEqual(["a1", "a2", "b1"]);
    expect(line.waitingKeys).toBe(1);
    await Promise.all(all);
    expect(order).toEqual(["a1", "a2", "b1", "a3", "a4", "a5"]);
    expect(waited).toBe(3);
    expect(line.waitingKeys).toBe(0);
  });

  it("a waiter that gives up leaves the line (head or not) without taking a token", async () => {
    const limiter = new RateLimiterMemory({ points: 1, duration: 1 });
    const line = new FifoLimiter(limiter);
    await line.take("k");
    const head = new AbortController();
    const middle = new AbortController();
    const order: string[] = [];
    const a = line.take("k", head.signal).then(() => order.push("a"));
    const b = line.take("k", middle.signal).then(() => order.push("b"));
    const c = line.take("k").then(() => order.push("c"));
    middle.abort(new Error("gave up"));
    head.abort(new Error("gave up too"));
    await expect(a).rejects.toThrow("gave up too");
    await expect(b).rejects.toThrow("gave up");
    await c;
    expect(order).toEqual(["c"]);
    expect(line.waitingKeys).toBe(0);
    await expect(line.take("k", AbortSignal.abort(new Error("already")))).rejects.toThrow("already");
  });

  it("a store error fails the whole line at once: nobody behind pays the store's timeout again", async () => {
    let failNext = false;
    const memory = new RateLimiterMemory({ points: 1, duration: 1 });
    const flaky: PointLimiter = {
      consume: (key) => {
        if (failNext) {
          failNext = false;
          return Promise.reject(new Error("store down"));
        }
        return memory.consume(key);
      },
    };
    const line = new FifoLimiter(flaky);
    await line.take("k");
    const first = line.take("k");
    const second = line.take("k");
    // Fails the head's next try (after its wait), not the fast-path tries already made.
    await new Promise((resolve) => setImmediate(resolve));
    failNext = true;
    await expect(first).rejects.toThrow("store down");
    await expect(second).rejects.toThrow("store down");
    expect(line.waitingKeys).toBe(0);
    await line.take("k"); // the line works again (it waits for the window by itself)
  });
});
