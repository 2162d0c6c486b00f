// Command-line flags on the same schemas as configuration files: a flag is a setting whose
// environment variable is named explicitly; its name is its property's, in kebab-case. A flag
// given on the command line wins over its environment variable, which wins over the default.
import type { z } from "zod";
import { parseArgv } from "./argv.ts";
import type { ConfigIssue } from "./errors.ts";
import { collectSettings } from "./load-settings.ts";
import { type SettingLeaf, type SettingMeta, setting, settingLeaves, yamlKeyOf } from "./settings.ts";

export interface FlagMeta extends Omit<SettingMeta, "envAliases"> {
  /** The environment variable that stands in for the flag. */
  env: string;
  /** Repeatable: the parser gets a list; the environment variable separates the values by this. */
  listSeparator?: string;
}

/** A flag; `parse` gets a string (a list of strings when repeatable), or a boolean for a boolean flag. */
export function flag<T>(
  parse: (raw: unknown) => T,
  meta: FlagMeta & { default: string | number | boolean },
): z.ZodType<T>;
export function flag<T>(parse: (raw: unknown) => T, meta: FlagMeta): z.ZodOptional<z.ZodType<T>>;
export function flag<T>(
  parse: (raw: unknown) => T,
  meta: FlagMeta,
): z.ZodType<T> | z.ZodOptional<z.ZodType<T>> {
  const { env, listSeparator, ...rest } = meta;
  return setting(parse, {
    ...rest,
    envAliases: [env],
    ...(listSeparator !== undefined && { listSeparator }),
  });
}

/** "--kas-address" for the property kasAddress (a duration's `Ms` dropped: keepaliveIntervalMs -> --keepalive-interval). */
export function flagNameOf(leaf: SettingLeaf): string {
  return yamlKeyOf(leaf.keys.at(-1)!, leaf.meta).replaceAll("_", "-");
}

export type FlagsResult<S extends z.ZodObject> =
  | { help: true }
  | {
      help: false;
      /** Every valid flag's value (an invalid one is undefined: its problem is in `issues`). */
      flags: z.output<S>;
      issues: ConfigIssue[];
      /** Where each flag's value came from ("--flag" or the variable), by flag name: for checks made later. */
      sourceOf: (flagName: string) => string;
    };

/**
 * Parses argv and the environment against `schema`; `{help: true}` for -h/--help. Unknown flags
 * throw a ConfigError; a bad value is an issue naming the flag or variable it came from.
 */
export function readFlags<S extends z.ZodObject>(
  schema: S,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  program: string,
): FlagsResult<S> {
  const leaves = settingLeaves(schema);
  const values: Record<string, string | boolean | (string | boolean)[] | undefined> = parseArgv(
    argv,
    {
      help: { type: "boolean", short: "h" },
      ...Object.fromEntries(
        leaves.map((leaf) => [
          flagNameOf(leaf),
          {
            type: leaf.meta.kind === "boolean" ? ("boolean" as const) : ("string" as const),
            ...(leaf.meta.listSeparator !== undefined && { multiple: true }),
          },
        ]),
      ),
    },
    { command: program },
  );
  if (values.help === true) return { help: true };

  const byKeys = new Map(leaves.map((leaf) => [leaf.keys.join("."), leaf]));
  const sources = new Map<string, string>();
  const { value: flags, issues } = collectSettings(schema, {
    lookup: (leaf) => {
      const name = flagNameOf(leaf);
      const [envName] = leaf.meta.envAliases ?? [];
      const given = values[name];
      let found: { value: unknown; source: string } | undefined;
      if (given !== undefined) found = { value: given, source: `--${name}` };
      else if (envName !== undefined && env[envName]) {
        const text = env[envName];
        const sep = leaf.meta.listSeparator;
        const value = sep === undefined ? text : text.split(sep).filter((v) => v.trim() !== "");
        found = { value, source: envName };
      }
      sources.set(name, found?.source ?? `--${name}`);
      return found;
    },
    // A flag's problem is named by what the operator wrote: the flag, or its variable.
    field: (keys) => {
      const leaf = byKeys.get(keys.join("."));
      return { field: leaf ? sources.get(flagNameOf(leaf))! : keys.join(".") };
    },
  });
  return { help: false, flags, issues, sourceOf: (name) => sources.get(name) ?? `--${name}` };
}

/** `--help` rows: every flag with its environment variable and default. */
export function flagsHelp(schema: z.ZodObject): string {
  return settingLeaves(schema)
    .map((leaf) => {
      const arg = leaf.meta.kind === "boolean" ? "" : " <value>";
      const def = leaf.meta.default === undefined ? "" : ` (default ${JSON.stringify(leaf.meta.default)})`;
      return `  --${flagNameOf(leaf)}${arg}\n      ${leaf.meta.doc}${def}\n      env: ${leaf.meta.envAliases?.[0]}`;
    })
    .join("\n");
}
