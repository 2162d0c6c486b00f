// The schema is written once and built in two flavours:
// - "file": what kas reads from config.yaml. Unknown keys are refused (a typo must not silently
//   disable a feature) and durations are text ("3600s").
// - "wire": what agentk re-validates from kas's JSON. Unknown keys are dropped, so a newer kas
//   that sends a field this agent does not know cannot make it refuse the whole configuration;
//   durations are already milliseconds.
// Both flavours have the same output type.
import { z } from "zod";
import { parseDuration } from "./duration.ts";

export interface Flavour {
  readonly name: "file" | "wire";
  object<S extends z.ZodRawShape>(shape: S): z.ZodObject<S, z.core.$strict>;
  /** A non-negative duration, in milliseconds once parsed. */
  duration(): z.ZodType<number>;
}

const durationText = z.string().transform((text, ctx) => {
  const ms = parseDuration(text);
  if (ms !== undefined) return ms;
  ctx.addIssue({
    code: "custom",
    message: `invalid duration "${text}": write it like 3600s, 1m or 1h30m`,
  });
  return z.NEVER;
});

export const FILE: Flavour = {
  name: "file",
  object: (shape) => z.strictObject(shape),
  duration: () => durationText,
};

export const WIRE: Flavour = {
  name: "wire",
  // z.object strips unknown keys; its output type is the same as the strict one's.
  object: (shape) => z.object(shape) as unknown as z.ZodObject<typeof shape, z.core.$strict>,
  duration: () => z.number().nonnegative().max(Number.MAX_SAFE_INTEGER),
};

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
