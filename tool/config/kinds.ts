// The kinds of setting both daemons' schemas and the modules' sections are made of.
import { z } from "zod";
import { type SettingMeta, setting } from "./settings.ts";
import {
  parseBool,
  parseDuration,
  parseListenAddress,
  parseLogLevel,
  parseOneOf,
  parsePositiveDuration,
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
    .object({
      network: listenNetworkSetting(),
      address: addressSetting(address),
      ...tlsPair,
      listenGracePeriodMs: notUsedSetting(parsePositiveDuration, {
        kind: "duration",
        doc: "GitLab's: how long the listener keeps accepting after shutdown starts.",
        notUsed: "this kas keeps every listener accepting for shutdown_drain_delay after SIGTERM",
      }),
      ...(extra ?? ({} as Extra)),
    })
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

/** A share of something, in (0, 1] (e.g. "0.5"). */
export const shareSetting = kind((raw) => {
  const value = typeof raw === "number" ? raw : Number(typeof raw === "string" ? raw.trim() : Number.NaN);
  if (typeof raw === "boolean" || raw === "" || !(value > 0 && value <= 1)) {
    throw new ValueError(`expected a number above 0 and at most 1, got ${JSON.stringify(raw)}`);
  }
  return value;
}, "share (0-1]");

/**
 * Another implementation's setting that this one accepts but does not act on (`notUsed`: the
 * warning logged when it is set). No default, so that "set" can be told from "not set".
 */
export function notUsedSetting<T>(
  parse: (raw: unknown) => T,
  meta: { kind: string; doc: string; notUsed: string },
): z.ZodOptional<z.ZodType<T>> {
  return setting(parse, meta);
}

/**
 * GitLab's `network` of a listener (or of Redis): validated against GitLab's values, then held to
 * the one this implementation binds, TCP. A unix socket asked for and a TCP port bound instead
 * would be worse than a refusal.
 */
export function networkSetting(gitlabValues: readonly string[], what: string) {
  const gitlab = parseOneOf(gitlabValues);
  return setting(
    (raw) => {
      const value = gitlab(raw);
      if (value !== "tcp" && value !== "") {
        throw new ValueError(`${JSON.stringify(value)} is not offered: ${what} over TCP only (write tcp)`);
      }
      return "tcp" as const;
    },
    {
      kind: gitlabValues.filter((v) => v !== "").join("|"),
      doc: `GitLab's network setting; only tcp (the default) is offered: ${what} over TCP only.`,
    },
  );
}

/** A listener's network, as GitLab's kas writes it (ListenAgentCF.network and the others). */
export const listenNetworkSetting = () => networkSetting(["tcp", "tcp4", "tcp6", "unix"], "kas listens");
