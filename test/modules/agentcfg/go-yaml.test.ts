// Plain YAML scalars typed as go-yaml v2.4 types them (resolve.go), which is what GitLab's kas
// sees after sigs.k8s.io/yaml: numbers in Go's syntax, YAML 1.1 booleans, dates left as text.
import { describe, expect, test } from "vitest";
import { parse } from "yaml";
import { GO_YAML_OPTIONS, goYamlNumber } from "../../../modules/agentcfg/index.ts";

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
  ])("%j stays text", (text) => {
    expect(goYamlNumber(text)).toBeUndefined();
    if (text !== "") expect(typeof read(text)).toBe("string");
  });

  test(".inf, -.inf and .nan are the special floats (which GitLab then cannot turn into JSON)", () => {
    expect(read(".inf")).toBe(Number.POSITIVE_INFINITY);
    expect(read("-.Inf")).toBe(Number.NEGATIVE_INFINITY);
    expect(read(".NaN")).toBeNaN();
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
  test.each(["yES", "oN", "nil", "none", "'yes'", '"on"', "!!str yes"])("%s is a string", (t) => {
    expect(typeof read(t)).toBe("string");
  });
});
