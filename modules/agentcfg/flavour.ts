// The schema is written once and built in two flavours:
// - "file": what kas reads from config.yaml, field by field as GitLab's kas reads it (protojson
//   of agentcfg.ConfigurationFile): unknown keys refused (a typo must not silently disable a
//   feature), durations as protojson text ("3600s"), enums by name or number, integers as numbers
//   or numeric strings. (A null is an absent field: parse.ts drops it before the schema sees it.)
// - "wire": what agentk re-validates from kas's JSON. Unknown keys are dropped, so a newer kas
//   that sends a field this agent does not know cannot make it refuse the whole configuration;
//   values are already in their one parsed form (durations in milliseconds, enums by name).
// Both flavours have the same output type.
import { z } from "zod";
import { MAX_DURATION_MS, parseProtoDuration } from "./proto-duration.ts";
import { protoJsonInteger } from "./proto-json-number.ts";

export interface Flavour {
  readonly name: "file" | "wire";
  object<S extends z.ZodRawShape>(shape: S): z.ZodObject<S, z.core.$strict>;
  /** A google.protobuf.Duration (negative ones too, as protojson takes them), in milliseconds once parsed. */
  duration(): z.ZodType<number>;
  /**
   * A protobuf enum field. The output is the value's name; protojson also takes its number
   * (`level: 1` is `debug`). A number the enum does not define is refused: GitLab's kas would
   * pass it on, and its agent then refuses the whole configuration.
   */
  protoEnum<const T extends readonly [string, ...string[]]>(names: T): z.ZodType<T[number]>;
  /** An integer field checked by `schema`; protojson also takes it as a numeric string (`"10"`). */
  integer(schema: z.ZodType<number>): z.ZodType<number>;
}

const durationText = z.string().transform((text, ctx) => {
  const ms = parseProtoDuration(text);
  if (ms !== undefined) return ms;
  ctx.addIssue({
    code: "custom",
    message: `invalid duration "${text}": write it as protojson does, in seconds with an "s": 3600s, 1.5s, 0.25s`,
  });
  return z.NEVER;
});

function enumByNameOrNumber<const T extends readonly [string, ...string[]]>(names: T): z.ZodType<T[number]> {
  const choices = `one of ${names.map((v, i) => `${v} (${i})`).join(", ")}`;
  return z.unknown().transform((v, ctx): T[number] => {
    if (typeof v === "string" && (names as readonly string[]).includes(v)) return v;
    // protojson: any int32 is a value of an open enum; only the defined ones mean something here.
    if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v < names.length) return names[v]!;
    const what =
      typeof v === "string"
        ? `"${v}"`
        : typeof v === "number"
          ? String(v)
          : `a ${v === null ? "null" : typeof v}`;
    ctx.addIssue({ code: "custom", message: `invalid value ${what}: use ${choices}` });
    return z.NEVER;
  });
}

export const FILE: Flavour = {
  name: "file",
  object: (shape) => z.strictObject(shape),
  duration: () => durationText,
  protoEnum: enumByNameOrNumber,
  integer: (schema) => z.preprocess((v) => (typeof v === "string" ? (protoJsonInteger(v) ?? v) : v), schema),
};

export const WIRE: Flavour = {
  name: "wire",
  // z.object strips unknown keys; its output type is the same as the strict one's.
  object: (shape) => z.object(shape) as unknown as z.ZodObject<typeof shape, z.core.$strict>,
  duration: () => z.number().min(-MAX_DURATION_MS).max(MAX_DURATION_MS),
  protoEnum: (names) => z.enum(names),
  integer: (schema) => schema,
};

/** A proto3 string field whose empty value, like its absence, means `fallback`. */
export function stringOr(fallback: string) {
  return z
    .string()
    .default(fallback)
    .transform((v) => (v === "" ? fallback : v));
}

/**
 * A proto3 string field restricted to `values` (GitLab's `validate.rules string.in`), whose
 * empty value, like its absence, means `fallback`.
 */
export function stringChoice<const T extends readonly [string, ...string[]]>(values: T, fallback: T[number]) {
  const choices = values.map((v) => `"${v}"`).join(", ");
  return z
    .string()
    .optional()
    .transform((v, ctx): T[number] => {
      if (v === undefined || v === "") return fallback;
      if ((values as readonly string[]).includes(v)) return v;
      ctx.addIssue({
        code: "custom",
        message: `invalid value "${v}": use one of ${choices} ("" is ${fallback})`,
      });
      return z.NEVER;
    });
}

type OneOfOutput<S extends z.ZodRawShape> = {
  [K in keyof S]: { [P in K]: z.output<S[P]> } & { [P in Exclude<keyof S, K>]?: never };
}[keyof S];

/**
 * A protobuf `oneof` written as a YAML map holding exactly one of the given keys,
 * e.g. `access_as: {agent: {}}` or `ref: {branch: main}`.
 */
export function oneOf<S extends z.ZodRawShape>(f: Flavour, shape: S) {
  const names = Object.keys(shape);
  const partial = f.object(shape).partial();
  return partial
    .superRefine((value, ctx) => {
      const set = names.filter((k) => (value as Record<string, unknown>)[k] !== undefined);
      if (set.length !== 1) {
        ctx.addIssue({
          code: "custom",
          message:
            set.length === 0
              ? `exactly one of ${names.join(", ")} must be set`
              : `only one of ${names.join(", ")} may be set, found ${set.join(", ")}`,
        });
      }
    })
    .transform((value) => value as unknown as OneOfOutput<S>);
}
