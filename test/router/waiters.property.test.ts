// Waiters against a model, on a fake clock: whatever mix of waits, aborts, notifies and time, each
// waiter settles exactly once, for the reason the model says, at its deadline and not a
// millisecond before; counts match; and one timer serves them all.
import { getEventListeners } from "node:events";
import fc from "fast-check";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { Waiters } from "../../lib/router/index.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

const op = fc.oneof(
  fc.record({
    kind: fc.constant("wait" as const),
    key: fc.constantFrom("a", "b", "c"),
    in: fc.integer({ min: 0, max: 300 }),
  }),
  fc.record({ kind: fc.constant("abort" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("notify" as const), key: fc.constantFrom("a", "b", "c", "none") }),
  fc.record({ kind: fc.constant("notifyAll" as const) }),
  fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 120 }) }),
);

interface Entry {
  id: number;
  key: string;
  deadline: number;
  ctl: AbortController;
  expected?: string;
  seen?: string;
}

test("property: every waiter settles once, for the model's reason, never before its deadline", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
      const w = new Waiters<string>();
      const entries: Entry[] = [];
      const pending = () => entries.filter((e) => e.expected === undefined);
      const check = () => {
        for (const e of entries) {
          expect(e.seen, `waiter ${e.id}`).toBe(e.expected);
          // A settled waiter leaves nothing on its signal; a pending one listens once.
          expect(getEventListeners(e.ctl.signal, "abort")).toHaveLength(e.expected === undefined ? 1 : 0);
        }
        expect(w.count()).toBe(pending().length);
        for (const key of ["a", "b", "c"])
          expect(w.count(key)).toBe(pending().filter((e) => e.key === key).length);
        expect(vi.getTimerCount()).toBe(pending().length > 0 ? 1 : 0);
      };
      for (const o of ops) {
        if (o.kind === "wait") {
          const ctl = new AbortController();
          const e: Entry = { id: entries.length, key: o.key, deadline: Date.now() + o.in, ctl };
          entries.push(e);
          w.wait(e.key, { deadline: e.deadline, signal: ctl.signal }, () => new Error(`late ${e.id}`)).then(
            (v) => {
              if (e.seen !== undefined) throw new Error("settled twice");
              e.seen = `value ${v}`;
            },
            (err: Error) => {
              if (e.seen !== undefined) throw new Error("settled twice");
              e.seen = err.message;
            },
          );
          if (o.in === 0) e.expected = `late ${e.id}`; // a deadline already reached fails at once
        } else if (o.kind === "abort") {
          const open = pending();
          if (open.length === 0) continue;
          const e = open[o.pick % open.length]!;
          e.expected = `aborted ${e.id}`;
          e.ctl.abort(new Error(`aborted ${e.id}`));
        } else if (o.kind === "notify") {
          const woken = pending().filter((e) => e.key === o.key);
          for (const e of woken) e.expected = `value ${o.key}`;
          expect(w.notify(o.key, o.key)).toBe(woken.length);
        } else if (o.kind === "notifyAll") {
          const woken = pending();
          for (const e of woken) e.expected = "value all";
          expect(w.notifyAll("all")).toBe(woken.length);
        } else {
          // One millisecond at a time: a waiter must not expire before its deadline, nor after it.
          for (let t = 0; t < o.ms; t++) {
            await vi.advanceTimersByTimeAsync(1);
            for (const e of pending()) if (e.deadline <= Date.now()) e.expected = `late ${e.id}`;
            check();
          }
        }
        await vi.advanceTimersByTimeAsync(0);
        check();
      }
      w.rejectAll(new Error("shutdown"));
      for (const e of pending()) e.expected = "shutdown";
      await vi.advanceTimersByTimeAsync(0);
      check();
    }),
    { numRuns: 150 },
  );
});

test("a deadline beyond setTimeout's range waits in steps, and still fails at its time", async () => {
  const w = new Waiters<string>();
  const far = Date.now() + 2 ** 31 + 5_000;
  let outcome = "pending";
  w.wait("k", { deadline: far }, () => new Error("late")).catch((e: Error) => {
    outcome = e.message;
  });
  await vi.advanceTimersByTimeAsync(2 ** 31 - 1);
  expect(outcome).toBe("pending");
  expect(vi.getTimerCount()).toBe(1);
  await vi.advanceTimersByTimeAsync(far - Date.now() - 1);
  expect(outcome).toBe("pending");
  await vi.advanceTimersByTimeAsync(1);
  expect(outcome).toBe("late");
  expect(vi.getTimerCount()).toBe(0);
});

test("an aborted signal or a past deadline fails at once, without waiting", async () => {
  const w = new Waiters<string>();
  const reason = new Error("gone");
  await expect(
    w.wait("k", { deadline: Date.now() + 1000, signal: AbortSignal.abort(reason) }, () => new Error("late")),
  ).rejects.toBe(reason);
  await expect(w.wait("k", { deadline: Date.now() }, () => new Error("late now"))).rejects.toThrow(
    "late now",
  );
  expect(w.count()).toBe(0);
  expect(vi.getTimerCount()).toBe(0);
  expect(w.notify("k", "v")).toBe(0);
});
