// Durations as config.yaml writes them -> milliseconds.
import { describe, expect, test } from "vitest";
import { parseDuration } from "../../../modules/agentcfg/duration.ts";

describe("parseDuration", () => {
  test.each([
    ["3600s", 3_600_000],
    ["1m", 60_000],
    ["1h30m", 5_400_000],
    ["1h30m15s", 5_415_000],
    ["1.5h", 5_400_000],
    [".5s", 500],
    [".55s", 550],
    ["300ms", 300],
    ["1500us", 1.5],
    ["1500µs", 1.5],
    ["1500μs", 1.5], // Greek mu
    ["1.55h", 5_580_000],
    ["1.h", 3_600_000],
    ["9007199254740991ms", Number.MAX_SAFE_INTEGER], // the largest kept
    ["2000000ns", 2],
    ["0", 0],
    ["0s", 0],
    ["+10s", 10_000],
    ["1m1m", 120_000],
  ])("%s is %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  test.each([
    "",
    "1",
    "3600",
    "-1s",
    "s",
    "1d",
    "1h 30m",
    " 1s",
    "1S",
    "1.s.",
    "one second",
    `${"9".repeat(30)}h`,
    "9007199254740992ms", // one past a safe integer
    `${"9".repeat(400)}h`, // Infinity
    "1s+",
    "++1s",
  ])("%j is not a duration", (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});
