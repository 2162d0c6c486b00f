// Plain YAML scalars typed as go-yaml v2.4 types them (resolve.go), which is what GitLab's kas
// sees after sigs.k8s.io/yaml: numbers in Go's syntax, YAML 1.1 booleans, dates left as text.
import { describe, expect, test } from "vitest";
import { parse, stringify } from "yaml";
import { GO_YAML_OPTIONS, goYamlNumber } from "../../../modules/agentcfg/go-yaml.ts";

const read = (scalar: string): unknown => (parse(`v: ${scalar}`, GO_YAML_OPTIONS) as { v: unknown }).v;

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
    ["-0b0", -0],
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
  ])("%s is %j", (text, value) => {
    expect(read(text)).toBe(value);
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
