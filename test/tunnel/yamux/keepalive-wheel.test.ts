// Sessions with the same keepalive interval share one timer, and each still ticks once per interval.
import { afterEach, expect, test, vi } from "vitest";
import { joinKeepAlive, leaveKeepAlive } from "../../../lib/tunnel/yamux/keepalive-wheel.ts";

afterEach(() => {
  vi.useRealTimers();
});

test("1,000 members, one timer; each ticks once per interval, the first within an interval of joining", () => {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
  const interval = 16_000;
  const ticks = new Map<number, number[]>();
  const members = Array.from({ length: 1000 }, (_, i) => {
    const tick = () => ticks.set(i, [...(ticks.get(i) ?? []), Date.now()]);
    return tick;
  });
  const t0 = Date.now();
  // Joining over half an interval, as tunnels arrive.
  for (const [i, m] of members.entries()) {
    if (i % 100 === 0) vi.advanceTimersByTime(interval / 20);
    joinKeepAlive(interval, m);
  }
  expect(vi.getTimerCount()).toBe(1);
  vi.advanceTimersByTime(3 * interval);
  for (let i = 0; i < members.length; i++) {
    const at = ticks.get(i) ?? [];
    const joined = t0 + (Math.floor(i / 100) + 1) * (interval / 20);
    expect(at.length).toBeGreaterThanOrEqual(2);
    expect(at[0]! - joined).toBeGreaterThan(interval - interval / 16 - 1);
    expect(at[0]! - joined).toBeLessThanOrEqual(interval);
    for (let k = 1; k < at.length; k++) expect(at[k]! - at[k - 1]!).toBe(interval);
  }
  for (const m of members) leaveKeepAlive(interval, m);
  expect(vi.getTimerCount()).toBe(0);
  const before = [...ticks.values()].reduce((n, a) => n + a.length, 0);
  vi.advanceTimersByTime(3 * interval);
  expect([...ticks.values()].reduce((n, a) => n + a.length, 0)).toBe(before);
});

test("a member that leaves during a turn, or makes another leave, does not upset the others", () => {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
  const interval = 1_600;
  const seen: string[] = [];
  const b = () => seen.push("b");
  const a = () => {
    seen.push("a");
    leaveKeepAlive(interval, a);
    leaveKeepAlive(interval, b);
  };
  const c = () => seen.push("c");
  joinKeepAlive(interval, a);
  joinKeepAlive(interval, b);
  joinKeepAlive(interval, c);
  vi.advanceTimersByTime(interval);
  vi.advanceTimersByTime(interval);
  expect(seen.filter((s) => s === "a")).toEqual(["a"]);
  expect(seen.filter((s) => s === "c")).toEqual(["c", "c"]);
  leaveKeepAlive(interval, c);
  expect(vi.getTimerCount()).toBe(0);
});
