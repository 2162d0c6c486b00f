// Configuration schemas on zod: a setting is a zod schema for one value, built from one of the value
// parsers, with what `--help` shows about it. Sections are zod objects of settings, so the
// configuration's type is inferred from the schema and a module's section lives with the module.
import { z } from "zod";
import { ValueError } from "./values.ts";

/** What `--help` and error messages know about one setting. */
export interface SettingMeta {
  /** Shown in `--help` as the kind of value expected ("duration", "host:port", …). */
  kind: string;
  doc: string;
  /** In the form an operator would write it ("300s"); parsed like any other value. */
  default?: string | number | boolean;
  /** Other environment variables that set this field, checked after the derived name. */
  envAliases?: readonly string[];
  /** A repeatable flag: its environment variable separates the values by this. */
  listSeparator?: string;
  /**
   * Accepted (another implementation's setting, validated like any other) but not acted on: the
   * warning logged once at start when it is set. Refusing it would break a configuration file
   * carried over; ignoring it silently would let an operator believe it works.
   */
  notUsed?: string;
}

/** Settings' metadata, looked up by schema when walking a configuration schema. */
export const settingMeta = z.registry<SettingMeta>();

type Parse<T> = (raw: unknown) => T;

/**
 * One setting: `parse` turns what came from YAML, a flag or the environment into the typed value,
 * throwing a ValueError for the operator's mistakes. With a default, the value is always there.
 */
export function setting<T>(
  parse: Parse<T>,
  meta: SettingMeta & { default: string | number | boolean },
): z.ZodType<T>;
export function setting<T>(parse: Parse<T>, meta: SettingMeta): z.ZodOptional<z.ZodType<T>>;
export function setting<T>(parse: Parse<T>, meta: SettingMeta): z.ZodType<T> | z.ZodOptional<z.ZodType<T>> {
  const schema = z.unknown().transform((raw, ctx): T => {
    try {
      return parse(raw);
    } catch (err) {
      if (!(err instanceof ValueError)) throw err;
      // `value` marks the issue as the value's own, so the loader names where the value came from.
      ctx.issues.push({ code: "custom", message: err.message, input: raw, params: { value: true } });
      return z.NEVER;
    }
  }) as z.ZodType<T>;
  // Without a default a setting may be absent: `key?: T` in the configuration's type.
  return (meta.default === undefined ? schema.optional() : schema).register(settingMeta, meta);
}

/** A setting with the `Ms` convention: its property is `fooMs`, its YAML key `foo`. */
export function isDurationKey(key: string, meta: SettingMeta): boolean {
  return meta.kind === "duration" && key.endsWith("Ms");
}

/** One leaf of a configuration schema. */
export interface SettingLeaf {
  /** Dotted YAML path, e.g. "agent.listen.keepalive_interval". */
  path: string;
  /** Property keys in the parsed configuration, e.g. ["agent", "listen", "keepaliveIntervalMs"]. */
  keys: string[];
  meta: SettingMeta;
  schema: z.ZodType;
}

/** The YAML name of a property: snake_case, and a duration's `Ms` suffix dropped. */
export function yamlKeyOf(key: string, meta?: SettingMeta): string {
  const base = meta && isDurationKey(key, meta) ? key.slice(0, -2) : key;
  return base.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Every setting of a schema made of zod objects and `setting`s, in declaration order. */
export function settingLeaves(schema: z.ZodObject): SettingLeaf[] {
  const out: SettingLeaf[] = [];
  const walk = (object: z.ZodObject, path: string[], keys: string[]) => {
    for (const [key, child] of Object.entries(object.shape)) {
      const meta = settingMeta.get(child as z.ZodType);
      if (meta) {
        out.push({
          path: [...path, yamlKeyOf(key, meta)].join("."),
          keys: [...keys, key],
          meta,
          schema: child as z.ZodType,
        });
      } else if (child instanceof z.ZodObject) {
        walk(child, [...path, yamlKeyOf(key)], [...keys, key]);
      } else {
        throw new Error(
          `configuration schema: ${[...keys, key].join(".")} is neither a setting nor a section`,
        );
      }
    }
  };
  walk(schema, [], []);
  return out;
}
