// google.protobuf.Duration as protojson reads and writes it: the cases of protobuf-go's own
// tests (encoding/protojson decode_test.go, encode_test.go) and a round trip.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  formatProtoDuration,
  MAX_DURATION_MS,
  parseProtoDuration,
} from "../../../modules/agentcfg/proto-duration.ts";

describe("parseProtoDuration", () => {
  test.each([
    ["0s", 0],
    ["-0s", 0],
    ["3s", 3_000],
    ["-3s", -3_000],
    ["0.001s", 1],
    ["-0.001s", -1],
    ["3.000000003s", 3_000.000003],
    ["-3.000000003s", -3_000.000003],
    ["1.s", 1_000],
    [".5s", 500],
    ["-.5s", -500],
    ["+1s", 1_000],
    ["9s", 9_000],
    ["0.12345678s", 123.45678],
    [".s", 0], // protobuf-go accepts it (no digit required on either side of the point)
    ["315576000000.5s", 315_576_000_000_500],
    ["-315576000000s", -MAX_DURATION_MS],
  ])("%s is %d ms", (text, ms) => {
    expect(parseProtoDuration(text)).toBeCloseTo(ms, 6);
  });

  test.each([
    "",
    "s",
    "-s",
    "+s",
    "-",
    "1",
    "a.5s",
    "1a.5s",
    "1m",
    "1h",
    "1ms",
    "00s",
    "01s",
    "1.0000000001s",
    "1e1s",
    "--1s",
    "+-1s",
    "1.5.s",
    " 1s",
    "1s ",
    "1 s",
    "１s", // a full-width digit
    "315576000001s",
    "-315576000001s",
    "999999999999999999999s",
  ])("%j is refused", (text) => {
    expect(parseProtoDuration(text)).toBeUndefined();
  });
});

test("-0s and -.s are zero, not negative zero", () => {
  expect(Object.is(parseProtoDuration("-0s"), 0)).toBe(true);
  expect(Object.is(parseProtoDuration("-.s"), 0)).toBe(true);
  expect(Object.is(parseProtoDuration("-0.000s"), 0)).toBe(true);
});

describe("formatProtoDuration", () => {
  test.each([
    [0, "0s"],
    [3_600_000, "3600s"],
    [1_500, "1.500s"],
    [1, "0.001s"],
    [0.001, "0.000001s"],
    [0.000001, "0.000000001s"],
    [-1_500, "-1.500s"],
    [-0.000001, "-0.000000001s"],
    [1_000.1234567, "1.000123457s"],
    [999.9999999, "1s"], // rounds up to the next whole second
    [-999.9999999, "-1s"],
    [-0.0000001, "0s"], // rounds to zero: no sign
    [59_000.00000049, "59s"],
  ])("%d ms is %s", (ms, text) => {
    expect(formatProtoDuration(ms)).toBe(text);
  });

  test("what it writes reads back to the same nanosecond", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -315_576_000_000, max: 315_576_000_000 }),
        fc.nat(999_999_999),
        (s, n) => {
          // protojson's range ends at ±315576000000 s exactly: no nanos beyond it.
          const nanos = Math.abs(s) === 315_576_000_000 ? 0 : s < 0 ? -n : n;
          const ms = s * 1000 + nanos / 1e6;
          const text = formatProtoDuration(ms);
          expect(text).toMatch(/^-?\d+(\.(\d{3}|\d{6}|\d{9}))?s$/);
          const back = parseProtoDuration(text)!;
          // Within a nanosecond (the text's precision, reached through doubles) plus a double's noise.
          expect(Math.abs(back - ms)).toBeLessThanOrEqual(1.5e-6 + Math.abs(ms) * 1e-15);
        },
      ),
      { numRuns: 500 },
    );
  });
});
