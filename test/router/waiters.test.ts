import { describe, expect, it } from "vitest";
import { Waiters } from "../../lib/router/index.ts";

const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

describe("Waiters", () => {
  it("thousands of waiters share one timer and expire in deadline order", async () => {
    const w = new Waiters<string>();
    const before = timers();
    const now = Date.now() + 500; // room to create them all on a loaded machine
    const expired: number[] = [];
    const waits = Array.from({ length: 5000 }, (_, i) =>
      w
        .wait(`k${i % 50}`, { deadline: now + 50 + (i % 100) }, () => new Error(`late ${i}`))
        .catch(() => {
          expired.push(now + 50 + (i % 100));
        }),
    );
    expect(w.count()).toBe(5000);
    expect(timers() - before).toBeLessThanOrEqual(1);
    await Promise.all(waits);
    expect(expired).toHaveLength(5000);
    expect(expired).toEqual([...expired].sort((a, b) => a - b));
    expect(w.count()).toBe(0);
  });

  it("notify wakes one key's waiters oldest first and leaves the others", async () => {
    const w = new Waiters<string>();
    const deadline = Date.now() + 10_000;
    const order: string[] = [];
    const a = [1, 2, 3].map((n) =>
      w.wait("a", { deadline }, () => new Error("late")).then((v) => order.push(`${v}${n}`)),
    );
    const b = w.wait("b", { deadline }, () => new Error("late"));
    expect(w.notify("a", "x")).toBe(3);
    await Promise.all(a);
    expect(order).toEqual(["x1", "x2", "x3"]);
    expect(w.count("b")).toBe(1);
    w.rejectAll(new Error("shutdown"));
    await expect(b).rejects.toThrow("shutdown");
    expect(w.count()).toBe(0);
  });

  it("removing waiters from the middle keeps the earliest deadline armed", async () => {
    const w = new Waiters<string>();
    const now = Date.now();
    const ctls = Array.from({ length: 20 }, () => new AbortController());
    const waits = ctls.map((c, i) =>
      w
        .wait("k", { deadline: now + 40 + i * 5, signal: c.signal }, () => new Error(`late ${i}`))
        .then(
          () => "ok",
          (e: Error) => e.message,
        ),
    );
    for (let i = 0; i < 20; i += 2) ctls[i]!.abort(new Error(`aborted ${i}`));
    const results = await Promise.all(waits);
    expect(results).toEqual(results.map((_, i) => (i % 2 === 0 ? `aborted ${i}` : `late ${i}`)));
  });
});
