// Properties: nothing a file holds makes the parser throw anything but AgentConfigurationError,
// and every valid configuration survives YAML -> parse -> JSON -> agent side unchanged.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { stringify as stringifyYaml } from "yaml";
import {
  AgentConfigurationError,
  agentConfigurationSchema,
  DRY_RUN_STRATEGIES,
  deserializeAgentConfiguration,
  formatProtoDuration,
  GO_YAML_OPTIONS,
  INVENTORY_POLICIES,
  LOG_LEVELS,
  PRUNE_PROPAGATION_POLICIES,
  parseAgentConfiguration,
  serializeAgentConfiguration,
} from "../../../modules/agentcfg/index.ts";

// As GitLab reads YAML: strings that go-yaml v2 would read as booleans or numbers are quoted.
const stringify = (value: unknown, options: { collectionStyle?: "flow" } = {}) =>
  stringifyYaml(value, { ...GO_YAML_OPTIONS, ...options });

// a.b[0]["odd key"]: plain names joined by dots, indexes and other keys in brackets.
const PATH =
  /^(?:(?:[A-Za-z_][\w-]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])(?:\.[A-Za-z_][\w-]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*)?$/;

/** Parses, and checks that a refusal is well formed; returns whether the text was accepted. */
function parsesOrRefusesCleanly(text: string): boolean {
  try {
    parseAgentConfiguration(text);
    return true;
  } catch (e) {
    if (!(e instanceof AgentConfigurationError)) throw e;
    expect(e.issues.length).toBeGreaterThan(0);
    const lines = text.split(/\r\n|\r|\n/).length;
    for (const issue of e.issues) {
      expect(issue.path).toMatch(PATH);
      if (issue.line !== undefined) {
        expect(issue.line).toBeGreaterThanOrEqual(1);
        expect(issue.line).toBeLessThanOrEqual(lines + 1);
        expect(issue.column).toBeGreaterThanOrEqual(1);
      }
    }
    return false;
  }
}

// Keys of the real schema, so that generated documents reach deep into it.
const KEYS = [
  "gitops",
  "manifest_projects",
  "id",
  "paths",
  "glob",
  "ref",
  "branch",
  "prune",
  "reconcile_timeout",
  "dry_run_strategy",
  "observability",
  "logging",
  "level",
  "ci_access",
  "projects",
  "groups",
  "instance",
  "access_as",
  "agent",
  "impersonate",
  "username",
  "extra",
  "user_access",
  "user",
  "container_scanning",
  "cadence",
  "remote_development",
  "flux",
  "other",
];

const yamlish = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, -1, 1.5, "", "none", "3600s", "1.5s", "info", "x", "{}", "*a"),
    fc.string(),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.constantFrom(...KEYS), fc.string()), tie("value"), { maxKeys: 5 }),
  ),
})).value;

describe("never anything but AgentConfigurationError", () => {
  test("arbitrary strings", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 300 }), (text) => {
        parsesOrRefusesCleanly(text);
      }),
      { numRuns: 500 },
    );
  });

  test("arbitrary strings made of YAML punctuation", () => {
    const piece = fc.constantFrom(
      "gitops:",
      " ",
      "  ",
      "\n",
      "\t",
      "- ",
      ": ",
      "[",
      "]",
      "{",
      "}",
      ",",
      "&a ",
      "*a",
      "!!str ",
      "!foo ",
      "<<: ",
      "? ",
      "|",
      ">",
      '"',
      "'",
      "#",
      "---\n",
      "...\n",
      "%YAML 1.2\n",
      "id",
      "manifest_projects",
      "0x1F",
      "~",
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        parsesOrRefusesCleanly(pieces.join(""));
      }),
      { numRuns: 1000 },
    );
  });

  test("arbitrary YAML documents shaped like a configuration", () => {
    let accepted = 0;
    fc.assert(
      fc.property(yamlish, fc.constantFrom<"block" | "flow">("block", "flow"), (value, style) => {
        const text = stringify(value, style === "flow" ? { collectionStyle: "flow" } : {});
        if (parsesOrRefusesCleanly(text)) accepted++;
      }),
      { numRuns: 1000 },
    );
    // Some documents (null, {}, `observability: {}`...) must have been accepted, or the property
    // only exercised the "refused" branch.
    expect(accepted).toBeGreaterThan(0);
  });
});

// ---- valid configurations, written as people write them ----

const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}(\/[a-z][a-z0-9-]{0,10}){0,2}$/);
const text = fc.string({ minLength: 1, maxLength: 20 });

// As protojson writes a Duration (seconds, 0/3/6/9 fraction digits), and as people write it.
const duration = fc
  .record({ seconds: fc.nat(1_000_000), millis: fc.nat(999) })
  .chain(({ seconds, millis }) =>
    fc.constantFrom(
      { text: formatProtoDuration(seconds * 1000 + millis), ms: seconds * 1000 + millis },
      { text: `${seconds}s`, ms: seconds * 1000 },
      { text: `${seconds}.${String(millis).padStart(3, "0")}000s`, ms: seconds * 1000 + millis },
    ),
  );

const gitRef = fc.oneof(
  text.map((branch) => ({ branch })),
  text.map((tag) => ({ tag })),
  fc.stringMatching(/^[0-9a-f]{40}$/).map((commit) => ({ commit })),
);

const manifestProject = fc.record(
  {
    id: name,
    default_namespace: text,
    // Not empty: an empty list means the default glob (checked in parse.test.ts).
    paths: fc.array(fc.record({ glob: text }), { minLength: 1, maxLength: 3 }),
    reconcile_timeout: duration,
    dry_run_strategy: fc.constantFrom(...DRY_RUN_STRATEGIES),
    prune: fc.boolean(),
    prune_timeout: duration,
    prune_propagation_policy: fc.constantFrom(...PRUNE_PROPAGATION_POLICIES),
    inventory_policy: fc.constantFrom(...INVENTORY_POLICIES),
    ref: gitRef,
  },
  { requiredKeys: ["id"] },
);

const ciAccessAs = fc.oneof(
  fc.constant({ agent: {} }),
  fc.constant({ ci_job: {} }),
  fc.constant({ ci_user: {} }),
  fc
    .record(
      {
        username: text,
        groups: fc.array(text, { maxLength: 2 }),
        uid: fc.string(),
        extra: fc.array(fc.record({ key: text, val: fc.array(text, { minLength: 1, maxLength: 2 }) }), {
          maxLength: 2,
        }),
      },
      { requiredKeys: ["username"] },
    )
    .map((impersonate) => ({ impersonate })),
);

const ciAuthorization = {
  default_namespace: fc.string(),
  access_as: ciAccessAs,
  environments: fc.array(text, { maxLength: 3 }),
  protected_branches_only: fc.boolean(),
};

const fileConfig = fc.record(
  {
    gitops: fc.record(
      { manifest_projects: fc.array(manifestProject, { maxLength: 3 }) },
      { requiredKeys: [] },
    ),
    observability: fc.record(
      {
        logging: fc.record(
          { level: fc.constantFrom(...LOG_LEVELS), grpc_level: fc.constantFrom(...LOG_LEVELS) },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: [] },
    ),
    ci_access: fc.record(
      {
        projects: fc.array(fc.record({ id: name, ...ciAuthorization }, { requiredKeys: ["id"] }), {
          maxLength: 2,
        }),
        groups: fc.array(fc.record({ id: name, ...ciAuthorization }, { requiredKeys: ["id"] }), {
          maxLength: 2,
        }),
        instance: fc.record(ciAuthorization, { requiredKeys: [] }),
      },
      { requiredKeys: [] },
    ),
    user_access: fc.record(
      {
        access_as: fc.constantFrom({ agent: {} }, { user: {} }),
        projects: fc.array(fc.record({ id: name }), { maxLength: 2 }),
        groups: fc.array(fc.record({ id: name }), { maxLength: 2 }),
      },
      { requiredKeys: ["access_as"] },
    ),
    container_scanning: fc.record(
      {
        cadence: fc.constantFrom("0 0 * * *", "0 18 * * 5"),
        vulnerability_report: fc.record({ namespaces: fc.array(text, { maxLength: 2 }) }),
        scanner_timeout: duration,
      },
      { requiredKeys: ["cadence"] },
    ),
    flux: fc.record({ webhook_receiver_url: fc.webUrl() }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
);

/** Replace generated {text, ms} durations by their text (for the file) or their ms (expected). */
function durationsAs(value: unknown, pick: "text" | "ms"): unknown {
  if (Array.isArray(value)) return value.map((v) => durationsAs(v, pick));
  if (value && typeof value === "object") {
    const o = value as Record<string, unknown>;
    if (typeof o.text === "string" && typeof o.ms === "number" && Object.keys(o).length === 2) return o[pick];
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, durationsAs(v, pick)]));
  }
  return value;
}

describe("valid configurations", () => {
  test("YAML -> parse keeps every value written, durations in milliseconds", () => {
    fc.assert(
      fc.property(fileConfig, (generated) => {
        const parsed = parseAgentConfiguration(stringify(durationsAs(generated, "text")));
        // What was written is in the result (defaults may add more around it).
        expect(parsed).toMatchObject(durationsAs(generated, "ms") as object);
      }),
      { numRuns: 300 },
    );
  });

  test("parse -> serialize -> agent side is the identity", () => {
    fc.assert(
      fc.property(fileConfig, (generated) => {
        const parsed = parseAgentConfiguration(stringify(durationsAs(generated, "text")));
        expect(deserializeAgentConfiguration(serializeAgentConfiguration(parsed))).toEqual(parsed);
      }),
      { numRuns: 300 },
    );
  });

  test("parsing is idempotent: a parsed configuration written back out parses to itself", () => {
    // The file schema takes duration text; everything else in a parsed config is already file-shaped.
    fc.assert(
      fc.property(fileConfig, (generated) => {
        const parsed = parseAgentConfiguration(stringify(durationsAs(generated, "text")));
        const again = agentConfigurationSchema.parse(JSON.parse(JSON.stringify(parsed), reviveDurations));
        expect(again).toEqual(parsed);
      }),
      { numRuns: 200 },
    );
  });

  test("an unknown key anywhere in a valid configuration is refused with its path", () => {
    fc.assert(
      fc.property(fileConfig, fc.nat(), (generated, pick) => {
        const doc = durationsAs(generated, "text") as Record<string, unknown>;
        const objects = objectsIn(doc, "");
        const [target, path] = objects[pick % objects.length]!;
        target.zz_unknown = 1;
        let issues: { path: string; message: string }[] = [];
        try {
          parseAgentConfiguration(stringify(doc));
        } catch (e) {
          issues = [...(e as AgentConfigurationError).issues];
        }
        const where = path === "" ? "zz_unknown" : `${path}.zz_unknown`;
        // Inside a oneof ({agent: {}}), the key makes the oneof's own check fail too: only
        // require that the unknown key itself is reported.
        expect(issues).toContainEqual({
          path: where,
          message: 'unknown key "zz_unknown"',
          line: expect.any(Number),
          column: expect.any(Number),
        });
      }),
      { numRuns: 300 },
    );
  });
});

const DURATION_FIELDS = new Set(["reconcile_timeout", "prune_timeout", "scanner_timeout"]);
function reviveDurations(key: string, value: unknown): unknown {
  return DURATION_FIELDS.has(key) && typeof value === "number" ? formatProtoDuration(value) : value;
}

/** Every plain object in `value` with its YAML path. */
function objectsIn(value: unknown, path: string): [Record<string, unknown>, string][] {
  if (Array.isArray(value)) return value.flatMap((v, i) => objectsIn(v, `${path}[${i}]`));
  if (!value || typeof value !== "object") return [];
  const o = value as Record<string, unknown>;
  return [
    [o, path],
    ...Object.entries(o).flatMap(([k, v]) => objectsIn(v, path === "" ? k : `${path}.${k}`)),
  ];
}
