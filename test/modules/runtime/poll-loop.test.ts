// The polling loop the Git-watching modules share: one poll at a time (one asked for meanwhile
// runs once, right after), the period between polls, back-off after failures, and stop.
import { afterEach, describe, expect, test, vi } from "vitest";
import { PollLoop } from "../../../modules/runtime/index.ts";

describe("PollLoop", () => {
  afterEach(() => vi.useRealTimers());

  test("a poll asked for while one runs runs once, right after; never two at once", async () => {
    let running = 0;
    let most = 0;
    let polls = 0;
    let release!: () => void;
    const loop = new PollLoop(
      async () => {
        polls++;
        running++;
        most = Math.max(most, running);
        if (polls === 1) await new Promise<void>((r) => (release = r));
        running--;
        return true;
      },
      { periodMs: 3_600_000 },
    );
    const first = loop.now();
    void loop.now();
    void loop.now();
    expect(loop.running).toBe(true);
    release();
    await first;
    expect(polls).toBe(2);
    expect(most).toBe(1);
    loop.stop();
  });

  test("the period between polls; after failures 1 s, 2 s, 4 s …, capped at the period; a success resets it", async () => {
    vi.useFakeTimers();
    const results = [false, false, false, true, true];
    const at: number[] = [];
    const loop = new PollLoop(
      async () => {
        at.push(Date.now());
        return results.shift() ?? true;
      },
      { periodMs: 60_000, random: () => 0.5 },
    );
    const start = Date.now();
    await loop.now();
    await vi.advanceTimersByTimeAsync(1_000 + 2_000 + 4_000 + 60_000);
    expect(at.map((t) => t - start)).toEqual([0, 1_000, 3_000, 7_000, 67_000]);
    loop.stop();
    await vi.advanceTimersByTimeAsync(600_000);
    expect(at).toHaveLength(5);
  });

  test("a poll that throws counts as a failure and is reported", async () => {
    const errors: unknown[] = [];
    const loop = new PollLoop(
      async () => {
        throw new Error("a bug");
      },
      { periodMs: 3_600_000, onError: (err) => errors.push(err) },
    );
    await loop.now();
    expect(loop.failures).toBe(1);
    expect(errors).toHaveLength(1);
    loop.stop();
  });
});
