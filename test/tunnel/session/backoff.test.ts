import { expect, test } from "vitest";
import { Backoff } from "../../../lib/tunnel/session/index.ts";

test("defaults: 1 s, x1.6 per attempt, capped at 20 s", () => {
  const b = new Backoff({}, () => 0.5); // jitter centred: no spread
  const delays = Array.from({ length: 10 }, () => b.next());
  expect(delays.slice(0, 4)).toEqual([1000, 1600, 2560, 4096]);
  expect(Math.max(...delays)).toBe(20_000);
  expect(delays.at(-1)).toBe(20_000);
  b.reset();
  expect(b.next()).toBe(1000);
});

test("jitter spreads each delay by up to the configured fraction either way", () => {
  const low = new Backoff({ initialMs: 1000, jitter: 0.2 }, () => 0);
  const high = new Backoff({ initialMs: 1000, jitter: 0.2 }, () => 0.999999);
  expect(low.next()).toBe(800);
  expect(high.next()).toBe(1200);
});

test("nonsense settings are refused with a clear message", () => {
  expect(() => new Backoff({ initialMs: 0 })).toThrow(/initialMs/);
  expect(() => new Backoff({ initialMs: 10, maxMs: 5 })).toThrow(/initialMs <= maxMs/);
  expect(() => new Backoff({ factor: 0.5 })).toThrow(/factor/);
  expect(() => new Backoff({ jitter: 1 })).toThrow(/jitter/);
});
