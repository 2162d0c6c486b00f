// config.yaml read as GitLab's kas reads it (sigs.k8s.io/yaml, then protojson into
// agentcfg.ConfigurationFile, then protoc-gen-validate): each case below is one of protojson's
// rules, taken from protobuf-go v1.31 (encoding/protojson) and go-yaml v2.4 (resolve.go).
import { describe, expect, test } from "vitest";
import {
  type AgentConfiguration,
  AgentConfigurationError,
  EMPTY_AGENT_CONFIGURATION,
  parseAgentConfiguration,
} from "../../../modules/agentcfg/index.ts";

const parse = (text: string) => parseAgentConfiguration(text);

function refusal(text: string): { path: string; message: string }[] {
  try {
    parseAgentConfiguration(text);
  } catch (e) {
    if (!(e instanceof AgentConfigurationError)) throw e;
    return e.issues.map(({ path, message }) => ({ path, message }));
  }
  throw new Error(`accepted: ${text}`);
}

const project = (fields: string) => `gitops:\n  manifest_projects:\n  - id: a\n${fields}`;
const firstProject = (c: AgentConfiguration) => c.gitops!.manifest_projects[0]!;
const DEFAULT_PROJECT = firstProject(parse(project("")));

describe("an empty string is the default of GitLab's string-valued choices", () => {
  test.each([
    ["dry_run_strategy", "none"],
    ["prune_propagation_policy", "foreground"],
    ["inventory_policy", "must_match"],
    ["default_namespace", "default"],
  ])("%s: '' is %s", (field, fallback) => {
    expect(firstProject(parse(project(`    ${field}: ''\n`)))).toEqual({
      ...DEFAULT_PROJECT,
      [field]: fallback,
    });
  });

  test("they are strings in GitLab's proto: a number is refused", () => {
    expect(refusal(project("    dry_run_strategy: 1\n"))).toEqual([
      {
        path: "gitops.manifest_projects[0].dry_run_strategy",
        message: expect.stringMatching(/expected string/),
      },
    ]);
  });
});

describe("enums (observability.logging levels): by name or by number", () => {
  test.each([
    ["0", "info"],
    ["1", "debug"],
    ["2", "warn"],
    ["3", "error"],
    ["1.0", "debug"], // a whole YAML float is a whole JSON number
    ["0x2", "warn"], // go-yaml reads Go integer syntax
    ["debug", "debug"],
  ])("level: %s is %s", (written, level) => {
    const c = parse(`observability:\n  logging:\n    level: ${written}\n    grpc_level: ${written}\n`);
    expect(c.observability.logging).toEqual({ level, grpc_level: level });
  });

  test.each([
    ["''", /invalid value "": use one of info \(0\)/], // protojson: no enum value is named ""
    ["'1'", /invalid value "1"/], // a number in a string is not a name
    ["DEBUG", /invalid value "DEBUG"/],
    ["1.5", /invalid value 1.5/],
    ["true", /invalid value a boolean/],
    // protojson passes an undefined number of an open enum; GitLab's agent then refuses the
    // whole configuration (logz.LevelFromString): refused here at once.
    ["7", /invalid value 7: use one of info \(0\), debug \(1\), warn \(2\), error \(3\)/],
    ["-1", /invalid value -1/],
  ])("level: %s is refused", (written, message) => {
    expect(refusal(`observability:\n  logging:\n    level: ${written}\n`)).toEqual([
      { path: "observability.logging.level", message: expect.stringMatching(message) },
    ]);
  });
});

describe("durations: protojson's google.protobuf.Duration text, nothing else", () => {
  test.each([
    ["3600s", 3_600_000],
    ["1.5s", 1_500],
    ["0.000000001s", 0.000001],
    ["1.s", 1_000],
    [".5s", 500],
    ["+2s", 2_000],
    ["-1s", -1_000], // no validation rule on reconcile_timeout: GitLab takes it (no wait)
    ["0s", 0],
    ["315576000000s", 315_576_000_000_000],
  ])("%s is %d ms", (text, ms) => {
    expect(firstProject(parse(project(`    reconcile_timeout: '${text}'\n`))).reconcile_timeout).toBe(ms);
  });

  test.each([
    "1m",
    "1h30m",
    "300ms",
    "3600",
    "1.0000000001s",
    "01s",
    " 1s",
    "1s ",
    "1e3s",
    "1S",
    "s",
    "-s",
    "315576000001s",
  ])("%j is refused", (text) => {
    expect(refusal(project(`    reconcile_timeout: '${text}'\n`))).toEqual([
      {
        path: "gitops.manifest_projects[0].reconcile_timeout",
        message: expect.stringMatching(/^invalid duration .*protojson/),
      },
    ]);
  });

  test("a bare number is refused (protojson wants a string)", () => {
    expect(refusal(project("    prune_timeout: 3600\n"))[0]!.path).toBe(
      "gitops.manifest_projects[0].prune_timeout",
    );
  });

  test("remote_development's intervals must still be positive (GitLab's validate rule gt 0)", () => {
    expect(refusal("remote_development:\n  partial_sync_interval: -1s\n")).toEqual([
      { path: "remote_development.partial_sync_interval", message: "must be positive" },
    ]);
  });
});

describe("null is an unset field, whatever its type", () => {
  test("a whole section, a message, a list, a scalar, an enum, a duration", () => {
    const c = parse(
      [
        "gitops:",
        "  manifest_projects:",
        "  - id: a",
        "    paths: null",
        "    ref: ~",
        "    prune:",
        "    reconcile_timeout: null",
        "    dry_run_strategy: null",
        "observability:",
        "  logging: {level: null, grpc_level: null}",
        "  google_profiler: null",
        "ci_access: null",
        "flux: ~",
        "",
      ].join("\n"),
    );
    expect(c).toEqual({
      gitops: { manifest_projects: [DEFAULT_PROJECT] },
      observability: EMPTY_AGENT_CONFIGURATION.observability,
    });
  });

  test("a oneof member set to null is not set: the other member is the one", () => {
    expect(firstProject(parse(project("    ref: {branch: null, tag: v1}\n"))).ref).toEqual({ tag: "v1" });
    expect(refusal(project("    ref: {branch: null}\n"))).toEqual([
      { path: "gitops.manifest_projects[0].ref", message: "exactly one of tag, branch, commit must be set" },
    ]);
  });

  test("a required field set to null is missing", () => {
    expect(refusal("container_scanning:\n  cadence: null\n")[0]!.path).toBe("container_scanning.cadence");
  });

  test("a null item in a list is refused (protojson has no null element)", () => {
    expect(refusal("gitops:\n  manifest_projects: [null]\n")).toEqual([
      {
        path: "gitops.manifest_projects[0]",
        message: expect.stringMatching(/expected object, received null/),
      },
    ]);
  });

  test("an unknown key is refused even when null", () => {
    expect(refusal("gitops:\n  charts: null\n")).toEqual([
      { path: "gitops.charts", message: 'unknown key "charts"' },
    ]);
  });
});

describe("field names: the proto's json_name, which GitLab sets to the snake_case name", () => {
  test("camelCase is refused, as protojson refuses it (json_name = proto name here)", () => {
    expect(refusal("gitops:\n  manifestProjects: []\n")).toEqual([
      { path: "gitops.manifestProjects", message: 'unknown key "manifestProjects"' },
    ]);
    expect(refusal("ciAccess: {}\n")).toEqual([{ path: "ciAccess", message: 'unknown key "ciAccess"' }]);
  });
});

describe("scalars typed as go-yaml v2 (YAML 1.1) types them", () => {
  test.each(["yes", "on", "y", "True", "ON"])("prune: %s is true", (word) => {
    expect(firstProject(parse(project(`    prune: ${word}\n`))).prune).toBe(true);
  });

  test.each(["no", "off", "n", "False"])("prune: %s is false", (word) => {
    expect(firstProject(parse(project(`    prune: ${word}\n`))).prune).toBe(false);
  });

  test.each([
    ["yes", "boolean"],
    ["on", "boolean"],
    ["1.0", "number"],
    ["0x1F", "number"],
    ["1_000", "number"],
  ])("branch: %s is not a string: refused, with a hint to quote it", (written, type) => {
    expect(refusal(project(`    ref: {branch: ${written}}\n`))).toEqual([
      {
        path: "gitops.manifest_projects[0].ref.branch",
        message: `Invalid input: expected string, received ${type} (YAML reads the unquoted value as a ${type}: quote it)`,
      },
    ]);
  });

  test("quoted, or not a YAML 1.1 scalar of another type, it is a string", () => {
    const c = parse(
      project(
        "    ref: {branch: 'yes'}\n  - id: b\n    ref: {tag: 2024-01-01}\n  - id: c\n    ref: {tag: 0o9}\n",
      ),
    );
    expect(c.gitops!.manifest_projects.map((p) => p.ref)).toEqual([
      { branch: "yes" },
      { tag: "2024-01-01" }, // a date stays text, as go-yaml v2 leaves it into interface{}
      { tag: "0o9" },
    ]);
  });

  test("a Kubernetes quantity is a string field: a bare number is refused", () => {
    expect(
      refusal(
        "container_scanning:\n  cadence: '* * * * *'\n  resource_requirements: {limits: {cpu: 1}}\n",
      )[0]!.path,
    ).toBe("container_scanning.resource_requirements.limits.cpu");
  });

  test("merge keys, as go-yaml v2 merges them", () => {
    const c = parse(
      "gitops:\n  manifest_projects:\n  - &base {id: a, prune: false, dry_run_strategy: client}\n  - <<: *base\n    id: b\n",
    );
    expect(c.gitops!.manifest_projects.map((p) => [p.id, p.prune, p.dry_run_strategy])).toEqual([
      ["a", false, "client"],
      ["b", false, "client"],
    ]);
  });
});

describe("integers: a number or a numeric string", () => {
  test.each([
    ["10", 10],
    ["'10'", 10],
    ["'1e3'", 1000],
    ["1e3", 1000],
  ])("report_max_size: %s is %d", (written, n) => {
    expect(
      parse(`container_scanning:\n  cadence: '* * * * *'\n  report_max_size: ${written}\n`)
        .container_scanning!.report_max_size,
    ).toBe(n);
  });

  test.each(["'1.5'", "' 10'", "'0x10'", "'+10'", "1.5"])("report_max_size: %s is refused", (written) => {
    expect(
      refusal(`container_scanning:\n  cadence: '* * * * *'\n  report_max_size: ${written}\n`)[0]!.path,
    ).toBe("container_scanning.report_max_size");
  });
});

describe("where this agent asks for more than GitLab's", () => {
  test("a manifest project without id: GitLab's agent takes the configuration project, this one says to write it", () => {
    expect(refusal("gitops:\n  manifest_projects:\n  - paths: [{glob: '*.yaml'}]\n")).toEqual([
      {
        path: "gitops.manifest_projects[0].id",
        message: "required here: write the project (GitLab's agent would take the configuration project)",
      },
    ]);
  });
});
