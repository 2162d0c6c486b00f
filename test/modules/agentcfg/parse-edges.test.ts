// The edges of parseAgentConfiguration that the realistic files in parse.test.ts do not reach:
// exact enum messages and bounds, where an error lands when YAML leaves a key's value out or
// puts text outside every item, the size limit's boundary and yaml's message trimming.
import { describe, expect, test } from "vitest";
import {
  AgentConfigurationError,
  type AgentConfigurationIssue,
  agentConfigurationSchema,
  parseAgentConfiguration,
} from "../../../modules/agentcfg/index.ts";

function issuesOf(
  text: string,
  options?: Parameters<typeof parseAgentConfiguration>[1],
): AgentConfigurationIssue[] {
  try {
    parseAgentConfiguration(text, options);
  } catch (e) {
    expect(e).toBeInstanceOf(AgentConfigurationError);
    return [...(e as AgentConfigurationError).issues];
  }
  throw new Error("expected the configuration to be refused");
}

const LEVELS = "use one of info (0), debug (1), warn (2), error (3)";
const level = (v: string) => `observability:\n  logging:\n    level: ${v}\n`;

describe("protobuf enums in the file", () => {
  test("every defined number is its name; the first past the end and a negative one are refused", () => {
    const levels = ["0", "1", "2", "3"].map(
      (n) => parseAgentConfiguration(level(n)).observability.logging.level,
    );
    expect(levels).toEqual(["info", "debug", "warn", "error"]);
    for (const n of ["4", "-1", "1.5"]) {
      expect(issuesOf(level(n))).toEqual([
        {
          path: "observability.logging.level",
          message: `invalid value ${n}: ${LEVELS}`,
          line: 3,
          column: 12,
        },
      ]);
    }
  });

  test("the message quotes a text, names any other type", () => {
    expect(issuesOf(level("verbose"))[0]!.message).toBe(`invalid value "verbose": ${LEVELS}`);
    expect(issuesOf(level("'1'"))[0]!.message).toBe(`invalid value "1": ${LEVELS}`);
    expect(issuesOf(level("true"))[0]!.message).toBe(`invalid value a boolean: ${LEVELS}`);
  });

  test("the exported schema, given a null where parse.ts would have dropped it, names the null", () => {
    const result = agentConfigurationSchema.safeParse({ observability: { logging: { level: null } } });
    expect(result.error?.issues.map((i) => [i.path, i.message])).toEqual([
      [["observability", "logging", "level"], `invalid value a null: ${LEVELS}`],
    ]);
  });
});

describe("type errors", () => {
  test("an unquoted boolean where a number is expected gets no advice about quoting", () => {
    expect(issuesOf("container_scanning:\n  cadence: '0 0 * * *'\n  report_max_size: yes\n")).toEqual([
      {
        path: "container_scanning.report_max_size",
        message: "Invalid input: expected number, received boolean",
        line: 3,
        column: 20,
      },
    ]);
  });
});

describe("positions where YAML leaves a node out", () => {
  test("an unknown explicit key without a value (`? foo`) points at the key", () => {
    expect(issuesOf("? foo\n")).toEqual([{ path: "foo", message: 'unknown key "foo"', line: 1, column: 3 }]);
  });

  test("an error after a key without a value is still located in its own pair", () => {
    expect(issuesOf("? foo\nb: !!int x\n")).toEqual([
      { path: "b", message: "cannot decode !!str `x` as a !!int", line: 2, column: 4 },
    ]);
  });

  test("text after a flow map or sequence at the root belongs to no item: the path is the root", () => {
    expect(issuesOf("{a: 1} junk")).toEqual([
      { path: "", message: "Unexpected scalar at node end", line: 1, column: 8 },
    ]);
    expect(issuesOf("[a, b] junk")).toEqual([
      { path: "", message: "Unexpected scalar at node end", line: 1, column: 8 },
    ]);
  });
});

describe("yaml's messages: the first line without yaml's own position", () => {
  test("a position past line 9 is trimmed too", () => {
    expect(issuesOf(`${"\n".repeat(9)}observability:\n  logging: level: debug\n`)).toEqual([
      {
        path: "observability.logging.level",
        message: "Nested mappings are not allowed in compact mappings",
        line: 11,
        column: 12,
      },
    ]);
  });

  test("at an empty last line, where yaml quotes the line before, the position is trimmed as well", () => {
    expect(issuesOf("gitops:\n  manifest_projects: [a, b\n")).toEqual([
      {
        path: "",
        message: "Flow sequence in block collection must be sufficiently indented and end with a ]",
        line: 3,
        column: 1,
      },
    ]);
  });

  test("text in the file that looks like yaml's position is kept; only yaml's own, at the end, goes", () => {
    expect(issuesOf(level('!!int " at line 9, column 9"'))).toEqual([
      {
        path: "observability.logging.level",
        message: "cannot decode !!str ` at line 9, column 9` as a !!int",
        line: 3,
        column: 12,
      },
    ]);
  });

  test("an alias bomb's message carries yaml's reason", () => {
    const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 9; i++) {
      const prev = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      lines.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(", ")}]`);
    }
    expect(issuesOf(lines.join("\n"))).toEqual([
      {
        path: "",
        message: "YAML aliases expand too much: Excessive alias count indicates a resource exhaustion attack",
      },
    ]);
  });
});

describe("size limit boundary", () => {
  test("a file of exactly maxBytes is read; one byte more is refused", () => {
    const exact = "observability: {}\n".padEnd(50, "#");
    expect(parseAgentConfiguration(exact, { maxBytes: 50 }).observability.logging.level).toBe("info");
    expect(issuesOf(`${exact}#`, { maxBytes: 50 })).toEqual([
      { path: "", message: "file is 51 bytes, over the limit of 50 bytes" },
    ]);
  });
});

describe("files yaml reads but cannot turn into a value", () => {
  test("an anchor inside its own value is a refused file, not a crash", () => {
    expect(issuesOf("a: &x {b: *x}\n")).toEqual([
      { path: "", message: "cannot read the file: Maximum call stack size exceeded" },
    ]);
  });

  test("a merge key whose source is not a map is refused as such, not blamed on aliases", () => {
    expect(issuesOf("<<: [1]\n")).toEqual([
      { path: "", message: "cannot read the file: Merge sources must be maps or map aliases" },
    ]);
  });
});

describe("the exported schema's own checks are zod custom issues", () => {
  test("a bad duration, a value outside a string choice, an empty oneof and an undefined enum value", () => {
    const result = agentConfigurationSchema.safeParse({
      gitops: {
        manifest_projects: [{ id: "a", reconcile_timeout: "soon", dry_run_strategy: "maybe", ref: {} }],
      },
      observability: { logging: { level: "verbose" } },
    });
    expect(result.error?.issues.map((i) => [i.path.at(-1), i.code])).toEqual([
      ["reconcile_timeout", "custom"],
      ["dry_run_strategy", "custom"],
      ["ref", "custom"],
      ["level", "custom"],
    ]);
  });
});
