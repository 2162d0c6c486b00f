// Properties of reading config.yaml as GitLab's kas reads it (protojson into
// agentcfg.ConfigurationFile): every way protojson accepts to write a configuration parses here to
// the same configuration as its plainest writing; a value protojson (or GitLab's validation)
// refuses is refused here, with the path of the field.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { stringify } from "yaml";
import {
  AgentConfigurationError,
  DRY_RUN_STRATEGIES,
  formatProtoDuration,
  GO_YAML_OPTIONS,
  INVENTORY_POLICIES,
  LOG_LEVELS,
  PRUNE_PROPAGATION_POLICIES,
  parseAgentConfiguration,
} from "../../../modules/agentcfg/index.ts";

// ---- configurations in their plainest form; null marks an optional field left unset ----

const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: null });
const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}(\/[a-z][a-z0-9-]{0,8})?$/);
const text = fc.string({ minLength: 1, maxLength: 12 });
// As protojson writes a Duration: whole seconds, or 3, 6 or 9 fraction digits.
const duration = fc
  .record({
    s: fc.nat(400_000),
    nanos: fc.oneof(
      fc.constant(0),
      fc.nat(999).map((m) => m * 1e6),
      fc.nat(999_999_999),
    ),
  })
  .map(({ s, nanos }) => formatProtoDuration(s * 1000 + nanos / 1e6));
const positiveDuration = duration.filter((d) => d !== "0s");

const manifestProject = fc.record({
  id: name,
  default_namespace: opt(fc.oneof(fc.constant("default"), name)),
  paths: opt(fc.array(fc.record({ glob: text }), { maxLength: 2 })),
  reconcile_timeout: opt(duration),
  dry_run_strategy: opt(fc.constantFrom(...DRY_RUN_STRATEGIES)),
  prune: opt(fc.boolean()),
  prune_timeout: opt(duration),
  prune_propagation_policy: opt(fc.constantFrom(...PRUNE_PROPAGATION_POLICIES)),
  inventory_policy: opt(fc.constantFrom(...INVENTORY_POLICIES)),
  ref: opt(
    fc.oneof(
      text.map((branch) => ({ branch })),
      text.map((tag) => ({ tag })),
    ),
  ),
});

const configuration = fc.record({
  gitops: opt(fc.record({ manifest_projects: opt(fc.array(manifestProject, { maxLength: 2 })) })),
  observability: opt(
    fc.record({
      logging: opt(
        fc.record({
          level: opt(fc.constantFrom(...LOG_LEVELS)),
          grpc_level: opt(fc.constantFrom(...LOG_LEVELS)),
        }),
      ),
      google_profiler: opt(fc.record({ enabled: opt(fc.boolean()), project_id: opt(text) })),
    }),
  ),
  ci_access: opt(
    fc.record({
      projects: opt(
        fc.array(
          fc.record({
            id: name,
            access_as: opt(fc.constantFrom({ agent: {} }, { ci_job: {} })),
            environments: opt(fc.array(text, { maxLength: 2 })),
            protected_branches_only: opt(fc.boolean()),
          }),
          { maxLength: 2 },
        ),
      ),
    }),
  ),
  container_scanning: opt(
    fc.record({
      cadence: fc.constantFrom("0 0 * * *", "*/5 * * * *"),
      report_max_size: opt(fc.integer({ min: 1, max: 1_000_000 })),
      scanner_timeout: opt(duration),
      vulnerability_report: opt(fc.record({ namespaces: opt(fc.array(name, { maxLength: 2 })) })),
    }),
  ),
  remote_development: opt(
    fc.record({
      enabled: opt(fc.boolean()),
      dns_zone: opt(name),
      partial_sync_interval: opt(positiveDuration),
    }),
  ),
  flux: opt(fc.record({ webhook_receiver_url: opt(fc.webUrl()) })),
});

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** The plainest writing: unset fields left out. */
function withoutNulls(v: Json): Json {
  if (Array.isArray(v)) return v.map(withoutNulls);
  if (v === null || typeof v !== "object") return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([, x]) => x !== null)
      .map(([k, x]) => [k, withoutNulls(x)]),
  );
}

// ---- the other ways protojson (after go-yaml) accepts each value ----

const DURATIONS = new Set(["reconcile_timeout", "prune_timeout", "scanner_timeout", "partial_sync_interval"]);
const CHOICES: Record<string, string> = {
  dry_run_strategy: "none",
  prune_propagation_policy: "foreground",
  inventory_policy: "must_match",
};
const TRUE_WORDS = ["true", "yes", "on", "y", "True", "YES"];
const FALSE_WORDS = ["false", "no", "off", "n", "False", "OFF"];

/** YAML text to put as is where a marker string stands (after stringify). */
class RawYaml {
  readonly texts: string[] = [];
  mark(yamlText: string): string {
    this.texts.push(yamlText);
    return `__raw${this.texts.length - 1}__`;
  }
  replace(yaml: string): string {
    return yaml.replace(/__raw(\d+)__/g, (_, i: string) => this.texts[Number(i)]!);
  }
}

const OMIT = Symbol("omit");

function variant(
  v: Json,
  key: string,
  inProject: boolean,
  g: fc.GeneratorValue,
  raw: RawYaml,
): Json | typeof OMIT {
  const pick = <T>(choices: readonly T[]): T => g(fc.constantFrom, ...choices);
  // An unset field: left out, or null, written in any of YAML's ways.
  if (v === null) return pick([OMIT, null, raw.mark("~"), raw.mark("null"), raw.mark("")]);
  if (Array.isArray(v))
    return v.map((item) => variant(item, "", key === "manifest_projects", g, raw) as Json);
  if (typeof v === "object") {
    const out: { [k: string]: Json } = {};
    for (const [k, x] of Object.entries(v)) {
      const w = variant(x, k, inProject, g, raw);
      if (w !== OMIT) out[k] = w;
    }
    return out;
  }
  if (typeof v === "boolean") return raw.mark(pick(v ? TRUE_WORDS : FALSE_WORDS));
  if (key === "level" || key === "grpc_level") {
    const n = LOG_LEVELS.indexOf(v as (typeof LOG_LEVELS)[number]);
    return pick([v, n, raw.mark(`0x${n.toString(16)}`), raw.mark(`${n}.0`)]);
  }
  if (key in CHOICES && v === CHOICES[key]) return pick([v, "", null, OMIT]);
  if (key === "default_namespace" && inProject && v === "default") return pick([v, "", null, OMIT]);
  if (key === "report_max_size" && typeof v === "number")
    return pick([v, String(v), `${v}e0`, raw.mark(`0x${v.toString(16)}`)]);
  if (DURATIONS.has(key) && typeof v === "string") return pick(durationWritings(v));
  return v;
}

/** "1.5s" -> every text protojson reads as the same Duration. */
function durationWritings(canonical: string): string[] {
  const [, sign, secs, frac = ""] = /^(-?)(\d+)(?:\.(\d+))?s$/.exec(canonical)!;
  const nine = frac.padEnd(9, "0");
  const trimmed = nine.replace(/0+$/, "");
  const out = [canonical, `${sign}${secs}.${nine}s`, `+${secs}.${trimmed}s`];
  if (trimmed === "") out.push(`${secs}s`, `${secs}.s`);
  else if (secs === "0") out.push(`.${trimmed}s`);
  return out;
}

const yamlOf = (v: unknown) => stringify(v, GO_YAML_OPTIONS);

describe("whatever way protojson accepts a configuration, it means the same here", () => {
  test("enum numbers, '' for defaults, null or nothing for unset fields, YAML 1.1 booleans, durations, numeric strings", () => {
    fc.assert(
      fc.property(configuration, fc.gen(), (generated, g) => {
        const plain = parseAgentConfiguration(yamlOf(withoutNulls(generated as Json)));
        const raw = new RawYaml();
        const written = raw.replace(yamlOf(variant(generated as Json, "", false, g, raw)));
        let other: unknown;
        try {
          other = parseAgentConfiguration(written);
        } catch (e) {
          throw new Error(`refused:\n${written}\n${(e as Error).message}`);
        }
        expect(other).toEqual(plain);
      }),
      { numRuns: 300 },
    );
  });
});

// ---- refusals ----

type Bad = { path: (string | number)[]; value: Json; raw?: string };

/** Every field of `v` a bad value can replace, with the bad values protojson refuses for it. */
function badSpots(v: Json, path: (string | number)[]): Bad[] {
  if (Array.isArray(v)) return v.flatMap((x, i) => badSpots(x, [...path, i]));
  if (v === null) return [];
  const key = path.at(-1);
  if (typeof v === "object") {
    // A field name protojson does not know: camelCase included (json_name is snake_case here).
    const camel = Object.keys(v).find((k) => k.includes("_"));
    const own: Bad[] = camel
      ? [{ path: [...path, camel.replace(/_(.)/g, (_, c: string) => c.toUpperCase())], value: "x" }]
      : [];
    return [...own, ...Object.entries(v).flatMap(([k, x]) => badSpots(x, [...path, k]))];
  }
  const at = (value: Json, raw?: string): Bad => ({ path, value, ...(raw && { raw }) });
  if (typeof key === "string" && DURATIONS.has(key))
    return ["1m", "1h30m", "250ms", "01s", "1.0000000001s", "1e3s", " 1s", "315576000001s"]
      .map((t) => at(t))
      .concat(at(60));
  if (key === "level" || key === "grpc_level")
    return [at("verbose"), at(""), at("INFO"), at(4), at(1.5), at("1"), at(true)];
  if (typeof key === "string" && key in CHOICES) return [at("maybe"), at(0), at("None")];
  if (typeof v === "boolean") return [at("maybe"), at(1), at("true")];
  if (key === "report_max_size") return [at("1.5"), at(" 7"), at("0x10"), at(0), at(true)];
  if (typeof v === "string" && ["id", "glob", "branch", "tag", "cadence"].includes(String(key)))
    return [
      at(5),
      at(true, "yes"),
      at(true, "on"),
      at(1, "1.0"),
      at([]),
      ...(key === "cadence" ? [] : [at("")]),
    ];
  return [];
}

function setAt(root: Json, path: (string | number)[], value: Json): void {
  let node = root as { [k: string]: Json };
  for (const seg of path.slice(0, -1)) node = node[seg as string] as { [k: string]: Json };
  node[path.at(-1) as string] = value;
}

function formatted(path: (string | number)[]): string {
  return path.map((s, i) => (typeof s === "number" ? `[${s}]` : i === 0 ? s : `.${s}`)).join("");
}

describe("what protojson refuses is refused here, with the field's path", () => {
  test("bad durations, unknown enum names and numbers, wrong types, camelCase names", () => {
    let tried = 0;
    fc.assert(
      fc.property(configuration, fc.nat(), (generated, pick) => {
        const doc = withoutNulls(generated as Json);
        const spots = badSpots(doc, []);
        fc.pre(spots.length > 0);
        const bad = spots[pick % spots.length]!;
        const raw = new RawYaml();
        setAt(doc, bad.path, bad.raw === undefined ? bad.value : raw.mark(bad.raw));
        const written = raw.replace(yamlOf(doc));
        let paths: string[] = [];
        try {
          parseAgentConfiguration(written);
        } catch (e) {
          if (!(e instanceof AgentConfigurationError)) throw e;
          paths = e.issues.map((i) => i.path);
        }
        expect(paths, written).toContain(formatted(bad.path));
        tried++;
      }),
      { numRuns: 400 },
    );
    expect(tried).toBeGreaterThan(100);
  });
});
