// An integer field written as a string, as protojson reads it (protobuf-go's unmarshalInt and
// normalizeToIntString): a JSON number whose value is whole, and nothing else.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { protoJsonInteger } from "../../../modules/agentcfg/proto-json-number.ts";

describe("protoJsonInteger", () => {
  test.each([
    ["0", 0],
    ["-0", 0],
    ["10", 10],
    ["-10", -10],
    ["1e3", 1000],
    ["1E3", 1000],
    ["1e+2", 100],
    ["1e-0", 1],
    ["1.0", 1],
    ["1.000", 1],
    ["0.0", 0],
    ["0e5", 0],
    ["0e20", 0],
    ["0.0e-5", 0],
    ["1.5e1", 15],
    ["1.500e1", 15],
    ["1.0500e2", 105],
    ["-2.5e1", -25],
    ["10e-1", 1],
    ["100e-2", 1],
    ["1000e-2", 10],
    ["10.0e-1", 1],
    ["1e19", 1e19],
    ["12345678901234567890", Number("12345678901234567890")],
  ])("%s is %d", (text, n) => {
    expect(protoJsonInteger(text)).toBe(n);
  });

  test.each([
    "",
    "-",
    "+1",
    "01",
    "-01",
    " 1",
    "1 ",
    "0x10",
    "1.",
    ".5",
    "1e",
    "e1",
    "--1",
    "1.5",
    "0.5",
    "-0.5",
    "1.05e1",
    "5e-1",
    "501e-2",
    "11e-1",
    "10e-2",
    "10e-3",
    "100e-3",
    "1.5e-1",
    "10.5e-1", // the integer digits moved right are zeros, but the fraction is not
    "1.0e-1",
    "1e20",
    "123456789012345678901", // 21 digits
    "Infinity",
    "NaN",
  ])("%j is refused", (text) => {
    expect(protoJsonInteger(text)).toBeUndefined();
  });

  test("a whole number, however its digits and exponent are written, reads as itself", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1e9, max: 1e9 }).filter((n) => n !== 0), // "00e-1" is no JSON number
        fc.nat(6),
        fc.nat(3),
        (n, shift, zeros) => {
          const plain = String(n);
          expect(protoJsonInteger(plain)).toBe(n);
          // n * 10^shift, written with the exponent.
          expect(protoJsonInteger(`${plain}e${shift}`)).toBe(n * 10 ** shift);
          // n written with `shift` extra zeros taken back by a negative exponent.
          expect(protoJsonInteger(`${plain}${"0".repeat(shift)}e-${shift}`)).toBe(n);
          // A fraction of trailing zeros changes nothing.
          expect(protoJsonInteger(`${plain}.${"0".repeat(zeros + 1)}`)).toBe(n);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("a number with a non-zero fraction left after its exponent is refused", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1e6, max: 1e6 }),
        fc.integer({ min: 1, max: 9 }),
        fc.nat(4),
        (n, digit, shift) => {
          // n.<zeros>digit with fewer exponent places than fraction digits.
          const text = `${n}.${"0".repeat(shift)}${digit}e${shift}`;
          expect(protoJsonInteger(text)).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });
});
