// The kinds of setting both daemons' schemas and the modules' sections are made of.
import { z } from "zod";
import { type SettingMeta, setting } from "./settings.ts";
import {
  parseBool,
  parseDuration,
  parseListenAddress,
  parseLogLevel,
  parsePositiveInt,
  parseString,
  parseUrlPath,
  type TlsFiles,
  ValueError,
} from "./values.ts";

type Doc = Omit<SettingMeta, "kind">;
type WithDefault = Doc & { default: string | number | boolean };

function kind<T>(parse: (raw: unknown) => T, name: string) {
  function make(meta: WithDefault): z.ZodType<T>;
  function make(meta: Doc): z.ZodOptional<z.ZodType<T>>;
  function make(meta: Doc): z.ZodType<T> | z.ZodOptional<z.ZodType<T>> {
    return setting<T>(parse, { ...meta, kind: name } as SettingMeta);
  }
  return make;
}

export const fileSetting = kind(parseString, "file path");
export const stringSetting = kind(parseString, "string");
export const addressSetting = kind(parseListenAddress, "host:port");
export const durationSetting = kind(parseDuration, "duration");
export const countSetting = kind(parsePositiveInt, "integer");
export const urlPathSetting = kind(parseUrlPath, "URL path");
export const boolSetting = kind(parseBool, "boolean");
export const logLevelSetting = kind(parseLogLevel, "log level");

/** A duration no shorter than `min` (written as an operator would, e.g. "1m"); `why` ends the refusal. */
export function durationAtLeast(min: string, why: string, meta: WithDefault): z.ZodType<number> {
  const floor = parseDuration(min);
  return setting(
    (raw) => {
      const ms = parseDuration(raw);
      if (ms < floor) throw new ValueError(`must be at least ${min} (${why}), got ${JSON.stringify(raw)}`);
      return ms;
    },
    { ...meta, kind: "duration" },
  );
}

/** The TLS files of a listener or a client: both or neither. */
export const tlsPair = {
  certificateFile: fileSetting({ doc: "TLS certificate, PEM (with key_file)." }),
  keyFile: fileSetting({ doc: "TLS private key, PEM (with certificate_file)." }),
};

/** Refuses a section that has one of certificate_file and key_file without the other. */
export function checkTlsPair(section: TlsFiles, ctx: z.RefinementCtx): void {
  if ((section.certificateFile === undefined) === (section.keyFile === undefined)) return;
  const missing = section.certificateFile === undefined ? "certificateFile" : "keyFile";
  ctx.addIssue({
    code: "custom",
    path: [missing],
    message: "required: certificate_file and key_file go together",
  });
}

/** A listener: where it binds and, optionally, the TLS it serves. */
export function listenSection<Extra extends z.ZodRawShape = Record<never, never>>(
  address: WithDefault,
  extra?: Extra,
) {
  return z
    .object({ address: addressSetting(address), ...tlsPair, ...(extra ?? ({} as Extra)) })
    .superRefine((section, ctx) => checkTlsPair(section as TlsFiles, ctx), { when: () => true });
}

/** A positive number, e.g. a rate per second ("0.5", 30). */
export const positiveNumberSetting = kind((raw) => {
  const value = typeof raw === "number" ? raw : Number(typeof raw === "string" ? raw.trim() : Number.NaN);
  if (typeof raw === "boolean" || raw === "" || !Number.isFinite(value) || value <= 0) {
    throw new ValueError(`expected a positive number, got ${JSON.stringify(raw)}`);
  }
  return value;
}, "number");
