// Plain YAML scalars typed as go-yaml v2.4 types them (resolve.go), which is what GitLab's kas
// sees after sigs.k8s.io/yaml: numbers in Go's syntax, YAML 1.1 booleans, dates left as text.
import { describe, expect, test } from "vitest";
import { parse, parseDocument, stringify } from "yaml";
import { GO_YAML_OPTIONS, goYamlNumber, isGoYamlTimestamp } from "../../../modules/agentcfg/go-yaml.ts";

// logLevel "error": a tag go-yaml does not know (`!local`) is a warning yaml would print; it is tested, not shown.
const read = (scalar: string): unknown =>
  (parse(`v: ${scalar}`, { ...GO_YAML_OPTIONS, logLevel: "error" }) as { v: unknown }).v;
/** The errors yaml reports for `v: <scalar>`, first lines only. */
const errorsOf = (scalar: string): string[] =>
  parseDocument(`v: ${scalar}`, GO_YAML_OPTIONS).errors.map((e) => e.message.split(" at line")[0]!);

describe("numbers", () => {
  test.each([
    ["0", 0],
    ["10", 10],
    ["-10", -10],
    ["+10", 10],
    ["1_000", 1000],
    ["0x1F", 31],
    ["0X1f", 31],
    ["017", 15], // Go's base-0 ParseInt: a leading 0 is octal
    ["0o17", 15],
    ["0O17", 15],
    ["0b101", 5],
    ["-0b101", -5],
    ["08", 8], // not octal: read as a float by yamlStyleFloat
    ["1.5", 1.5],
    [".5", 0.5],
    ["1.", 1],
    ["1e3", 1000],
    ["-1.5E-3", -0.0015],
    ["1_0.5", 10.5],
    ["-017", -15],
    ["+0x10", 16],
    ["-.5", -0.5],
    ["-.55", -0.55],
    [".55", 0.55],
    [".5e10", 5e9],
    ["+.5e1", 5],
    [".5e3", 500],
    [".5E-1", 0.05],
    ["1e+3", 1000],
    ["0", 0],
    ["-0b0", 0], // an int: Go's has no negative zero
    ["-0", 0],
    ["-0.0", -0], // a float keeps its sign
    ["18446744073709551615", 2 ** 64], // past int64: ParseUint takes it (2^64 - 1 as the nearest double)
    ["18446744073709551616", 2 ** 64], // past uint64: a float, the same number
    ["0xFFFFFFFFFFFFFFFF", 2 ** 64], // (2^64 - 1 as the nearest double),
    ["-9223372036854775808", -(2 ** 63)],
    ["+0x7FFFFFFFFFFFFFFF", 2 ** 63], // (2^63 - 1 as the nearest double)
    ["0777777777777777777777777", 7.777777777777778e23], // octal past 64 bits: yamlStyleFloat reads it decimal
    ["1_", 1], // underscores are dropped wherever they are
    ["0_x1F", 31],
  ])("%s is %d", (text, n) => {
    expect(goYamlNumber(text)).toBe(n);
    expect(read(text)).toBe(n);
  });

  test.each([
    "",
    "_1",
    "0x",
    "0b2",
    "1.2.3",
    "1e",
    "e3",
    ".",
    ".e1",
    "inf",
    "nan",
    "1:20",
    "2001-12-14",
    "0x1p3",
    "-",
    "+",
    "+x",
    "-a",
    ".1.5",
    ".5x",
    "0x1FFFFFFFFFFFFFFFF", // hex past 64 bits: neither ParseInt nor ParseUint, and no float
    "+0xFFFFFFFFFFFFFFFF", // past int64 with a sign: ParseUint takes no sign
    "+0x8000000000000000",
    "0x10000000000000000",
    "-0x8000000000000001",
    "0b11111111111111111111111111111111111111111111111111111111111111111",
  ])("%j stays text", (text) => {
    expect(goYamlNumber(text)).toBeUndefined();
    // "" is null and "-" a list item to YAML itself; the others read as text.
    if (text !== "" && text !== "-") expect(typeof read(text)).toBe("string");
  });

  test(".inf, -.inf and .nan are the special floats (which GitLab then cannot turn into JSON)", () => {
    for (const t of [".inf", ".Inf", ".INF", "+.inf", "+.INF"])
      expect(read(t)).toBe(Number.POSITIVE_INFINITY);
    for (const t of ["-.inf", "-.Inf", "-.INF"]) expect(read(t)).toBe(Number.NEGATIVE_INFINITY);
    for (const t of [".nan", ".NaN", ".NAN"]) expect(read(t)).toBeNaN();
  });

  test.each(["-.nan", "+.nan", ".Nan", ".iNf", "x.inf", ".infx", "inf"])("%s stays text", (t) => {
    expect(read(t)).toBe(t);
  });
});

describe("explicit tags", () => {
  test.each([
    ['!!int "10"', 10],
    ['!!bool "yes"', true],
    ['!!bool "no"', false],
    ['!!float ".inf"', Number.POSITIVE_INFINITY],
    ['!!null "~"', null],
    ["!!str 10", "10"],
    ['!!float "1.5"', 1.5],
    ["!!float 1.5", 1.5],
    ["!!float 2", 2], // an integer is taken as a float
    ['!!float "1e3"', 1000],
    ["!!float .5", 0.5],
    ['!!null ""', null],
    ["!!bool on", true],
    ['!!int "0x1F"', 31],
    ["!!int -5", -5],
    ["!!int -9223372036854775808", -(2 ** 63)], // the ends of int64 and uint64 are still ints
    ["!!int +9223372036854775807", 2 ** 63],
    ["!!int 18446744073709551615", 2 ** 64],
    ["!!timestamp 2001-12-14", "2001-12-14"], // into interface{}, go-yaml keeps a timestamp's text
    ['!!timestamp "2001-12-14t21:59:43.10-05:00"', "2001-12-14t21:59:43.10-05:00"],
    ["!!binary aGk=", "hi"],
    ["!!binary aA==", "h"],
    ["!!binary aGVsbG8h", "hello!"],
    ["!!binary |\n    aGVs\n    bG8=", "hello"],
    ["!local text", "text"], // a tag go-yaml does not know: the text
  ])("%s is %j", (text, value) => {
    expect(errorsOf(text)).toEqual([]);
    expect(read(text)).toBe(value);
  });

  test.each([
    ['!!int "1.5"', "cannot decode !!float `1.5` as a !!int"],
    ["!!int 08", "cannot decode !!float `08` as a !!int"], // not octal, so a float
    ["!!int abc", "cannot decode !!str `abc` as a !!int"],
    // One past them: a float (decimal) or text (hex), as strconv leaves them.
    ["!!int -9223372036854775809", "cannot decode !!float `-9223372036854775809` as a !!int"],
    ["!!int +9223372036854775808", "cannot decode !!float `+9223372036854775808` as a !!int"],
    ["!!int 18446744073709551616", "cannot decode !!float `18446744073709551616` as a !!int"],
    ["!!int 0x10000000000000000", "cannot decode !!str `0x10000000000000000` as a !!int"],
    ['!!bool "10"', "cannot decode !!int `10` as a !!bool"],
    ["!!float yes", "cannot decode !!bool `yes` as a !!float"],
    ["!!null x", "cannot decode !!str `x` as a !!null"],
    ["!!null 0", "cannot decode !!int `0` as a !!null"],
    ["!!timestamp 2001-02-30", "cannot decode !!str `2001-02-30` as a !!timestamp"],
    ["!!timestamp 12", "cannot decode !!int `12` as a !!timestamp"],
    ["!!binary aGk", "!!binary value contains invalid base64 data"],
    ["!!binary a*k=", "!!binary value contains invalid base64 data"],
  ])("%s is refused, as go-yaml refuses it: %s", (text, message) => {
    expect(errorsOf(text)).toEqual([message]);
  });
});

describe("timestamps (go-yaml's parseTimestamp, which only an explicit !!timestamp consults)", () => {
  test.each([
    "2001-12-14",
    "2001-1-2",
    "2024-02-29",
    "2001-12-14T21:59:43Z",
    "2001-12-14t21:59:43.123456789+01:00",
    "2001-12-14T1:2:3-05:30",
    "2001-12-14 21:59:43",
    "2001-12-14 21:59:43.5",
    "2001-12-14 21:59:43.123456789",
    "2001-12-01",
    "2001-12-14T21:59:43+01:60", // Go allows an offset of 24 hours or 60 minutes
    "2001-12-31T23:59:59+24:00",
  ])("%s is one", (t) => {
    expect(isGoYamlTimestamp(t)).toBe(true);
  });
  test.each([
    "2001-12-14T21:59:43", // after T a zone is required
    "2001-12-14 21:59:43Z", // after a space none is allowed
    "01-12-14",
    "2001-13-01",
    "2001-00-01",
    "2001-12-00",
    "2023-02-29",
    "2001-04-31",
    "2001-12-14T24:00:00Z",
    "2001-12-14T23:60:00Z",
    "2001-12-14T23:00:60Z",
    "2001-12-14T23:00:00.1234567890Z",
    "2001-12-14T23:00:00+25:00",
    "2001-12-14T23:00:00+01:61",
    "2001-12-14T23:00:00+0100",
    "2001-12-14 24:00:00",
    "2001-12-14 23:60:00",
    "2001-12-14 23:00:60",
    "2001-12-14 23:00:00.1234567890",
    "2001-12-14x",
    " 2001-12-14",
  ])("%s is not", (t) => {
    expect(isGoYamlTimestamp(t)).toBe(false);
  });
});

describe("booleans and null", () => {
  test.each(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"])("%s is true", (t) => {
    expect(read(t)).toBe(true);
  });
  test.each(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"])(
    "%s is false",
    (t) => {
      expect(read(t)).toBe(false);
    },
  );
  test.each(["", "~", "null", "Null", "NULL"])("%j is null", (t) => {
    expect(read(t)).toBeNull();
  });
  test.each([
    "yES",
    "oN",
    "nil",
    "none",
    "say",
    "xno",
    "bon",
    "yess",
    "offx",
    "nullx",
    "xnull",
    "'yes'",
    '"on"',
    "!!str yes",
  ])("%s is a string", (t) => {
    expect(typeof read(t)).toBe("string");
  });
});

describe("written back", () => {
  test("numbers, booleans and nulls plain, as go-yaml reads them; strings that would read as something else quoted", () => {
    const value = {
      a: null,
      b: 1e21,
      c: Number.NaN,
      d: Number.POSITIVE_INFINITY,
      e: Number.NEGATIVE_INFINITY,
      f: true,
      g: false,
      h: "yes",
      i: "0x1F",
      j: 1.5,
      k: -3,
      l: [null, undefined, 2e-7],
      m: "null",
      o: ".inf",
      p: "1_000",
      q: "plain",
    };
    const text = stringify(value, GO_YAML_OPTIONS);
    expect(text).toBe(
      [
        "a: null",
        "b: 1e21",
        "c: .nan",
        "d: .inf",
        "e: -.inf",
        "f: true",
        "g: false",
        'h: "yes"',
        'i: "0x1F"',
        "j: 1.5",
        "k: -3",
        "l:",
        "  - null",
        "  - null",
        "  - 2e-7",
        'm: "null"',
        'o: ".inf"',
        'p: "1_000"',
        "q: plain",
        "",
      ].join("\n"),
    );
    const back = parse(text, GO_YAML_OPTIONS) as Record<string, unknown>;
    expect(back).toEqual({ ...value, l: [null, null, 2e-7] });
  });
});
