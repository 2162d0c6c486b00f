// Reading a configuration schema's settings from a YAML document and the environment: the
// environment wins over the file, the file over the default; every problem is reported at once,
// naming the YAML path and where the bad value came from.
import type { z } from "zod";
import { ConfigError, type ConfigIssue } from "./errors.ts";
import { type SettingLeaf, settingLeaves, yamlKeyOf } from "./settings.ts";

export interface SettingsInput {
  /** The parsed YAML file (`{}` without one). */
  document: unknown;
  /** Named in errors for values from the file, e.g. "kas.yaml". */
  fileSource: string;
  env: NodeJS.ProcessEnv;
  /** The environment variable derived from a YAML path, e.g. agent.listen.address -> KAS_AGENT_LISTEN_ADDRESS. */
  envName: (path: string) => string;
}

/** Parses and validates a YAML document plus the environment; throws a ConfigError listing every issue. */
export function loadSettings<S extends z.ZodObject>(schema: S, input: SettingsInput): z.output<S> {
  const leaves = settingLeaves(schema);
  const issues: ConfigIssue[] = [];
  const fromFile = flatten(input.document, leaves, issues, input.fileSource);
  if (issues.length > 0) throw new ConfigError(issues);
  const pathOf = yamlPathOf(leaves);
  return parseSettings(schema, {
    lookup: (leaf) => {
      const [envName, envValue] = lookupEnv(leaf, input);
      if (envValue !== undefined) return { value: envValue, source: envName };
      if (fromFile.get(leaf.path) != null)
        return { value: fromFile.get(leaf.path), source: input.fileSource };
      return undefined;
    },
    field: (keys, source) => ({ field: pathOf(keys), ...(source && { source }) }),
  });
}

/** Where a setting's value came from, e.g. "kas.yaml", "KAS_AGENT_LISTEN_ADDRESS", "--log-level". */
export interface SettingValue {
  value: unknown;
  source: string;
}

export interface SettingsSources {
  /** The value given for a setting, if any (else its default applies). */
  lookup(leaf: SettingLeaf): SettingValue | undefined;
  /**
   * How an issue names its setting. `source` is where the value came from when the issue is the
   * value's own ("default" for a bad default); undefined for a check across settings.
   */
  field(keys: string[], source: string | undefined): Pick<ConfigIssue, "field" | "source">;
}

/** Validates the values `sources` give (defaults for the rest) against `schema`; throws a ConfigError listing every issue. */
export function parseSettings<S extends z.ZodObject>(schema: S, sources: SettingsSources): z.output<S> {
  const { value, issues } = collectSettings(schema, sources);
  if (issues.length > 0) throw new ConfigError(issues);
  return value;
}

/**
 * Like parseSettings, but returns the issues instead of throwing, with every valid setting in
 * `value` (an invalid one is undefined there): for a caller that checks more before reporting all.
 */
export function collectSettings<S extends z.ZodObject>(
  schema: S,
  sources: SettingsSources,
): { value: z.output<S>; issues: ConfigIssue[] } {
  const leaves = settingLeaves(schema);
  const given = new Map<string, string>();
  const raw = nest(
    leaves.map((leaf) => {
      const found = sources.lookup(leaf);
      given.set(leaf.keys.join("."), found?.source ?? "default");
      return [leaf.keys, found ? found.value : leaf.meta.default];
    }),
  );
  const result = schema.safeParse(raw);
  if (result.success) return { value: result.data, issues: [] };
  const issues = result.error.issues.map((issue) => {
    const keys = issue.path.map(String);
    // A value's own issue names where it came from; a check across settings names none.
    const own = issue.code === "custom" && issue.params?.value === true;
    return { ...sources.field(keys, own ? given.get(keys.join(".")) : undefined), message: issue.message };
  });
  const valid = leaves.map((leaf): [string[], unknown] => {
    const one = leaf.schema.safeParse(
      leaf.keys.reduce<unknown>((node, k) => (node as Record<string, unknown>)[k], raw),
    );
    return [leaf.keys, one.success ? one.data : undefined];
  });
  return { value: nest(valid) as z.output<S>, issues };
}

/** Nested objects from [property keys, value] pairs. */
function nest(pairs: [string[], unknown][]): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [keys, value] of pairs) {
    let node = root;
    for (const key of keys.slice(0, -1)) {
      node[key] ??= {};
      node = node[key] as Record<string, unknown>;
    }
    node[keys.at(-1)!] = value;
  }
  return root;
}

/** The first of the derived variable and the setting's aliases that is set to something non-empty. */
function lookupEnv(leaf: SettingLeaf, input: SettingsInput): [string, string | undefined] {
  for (const name of [input.envName(leaf.path), ...(leaf.meta.envAliases ?? [])]) {
    const value = input.env[name];
    if (value !== undefined && value !== "") return [name, value];
  }
  return ["", undefined];
}

/** Dotted path -> value for every known leaf of the document; unknown keys and misplaced scalars are issues. */
function flatten(
  document: unknown,
  leaves: SettingLeaf[],
  issues: ConfigIssue[],
  source: string,
): Map<string, unknown> {
  const known = new Set(leaves.map((l) => l.path));
  const sections = new Set(
    leaves.flatMap((l) =>
      l.path
        .split(".")
        .slice(0, -1)
        .map((_, i, a) => a.slice(0, i + 1).join(".")),
    ),
  );
  const out = new Map<string, unknown>();
  const walk = (node: unknown, prefix: string) => {
    if (!isMapping(node)) {
      issues.push({ field: prefix || "(top level)", message: "expected a mapping", source });
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      // An empty key is shown as "" so the message still names something.
      const path = prefix ? `${prefix}.${key || '""'}` : key || '""';
      if (known.has(path)) out.set(path, value);
      else if (sections.has(path)) {
        if (value !== null) walk(value, path);
      } else issues.push({ field: path, message: "unknown field", source });
    }
  };
  walk(document, "");
  return out;
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Property keys (as in a zod issue's path) -> the YAML path an operator writes. */
function yamlPathOf(leaves: SettingLeaf[]): (keys: string[]) => string {
  const byKeys = new Map(leaves.map((l) => [l.keys.join("."), l.path]));
  return (keys) => byKeys.get(keys.join(".")) ?? (keys.map((k) => yamlKeyOf(k)).join(".") || "(top level)");
}
