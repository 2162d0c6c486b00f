// Parsers for the value kinds a daemon's configuration uses. Each takes what came from YAML or an
// environment variable (so strings for everything from the environment) and either returns the
// typed value or throws a ValueError whose message completes "<field>: ...".

export class ValueError extends Error {
  override name = "ValueError";
}

/** Where to listen. `host` undefined means every interface (the address was ":port"). */
export interface ListenAddress {
  host: string | undefined;
  port: number;
}

/** Where to connect: host and port both required. */
export interface Endpoint {
  host: string;
  port: number;
}

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
export const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

function show(raw: unknown): string {
  return typeof raw === "string" ? JSON.stringify(raw) : String(raw);
}

function text(raw: unknown, expected: string): string {
  if (typeof raw === "string") return raw.trim();
  if (typeof raw === "number" || typeof raw === "boolean") return String(raw);
  throw new ValueError(`expected ${expected}, got ${raw === null ? "null" : typeof raw}`);
}

export function parseString(raw: unknown): string {
  const value = text(raw, "a string");
  if (value === "") throw new ValueError("must not be empty");
  return value;
}

/** A string that may be empty (a setting whose empty value means "off", as GitLab's sentry.dsn). */
export function parseAnyString(raw: unknown): string {
  return text(raw, "a string");
}

/** A number >= 0, e.g. a rate per second that may be 0 ("no events"). */
export function parseNonNegativeNumber(raw: unknown): number {
  const value = typeof raw === "number" ? raw : Number(typeof raw === "string" ? raw.trim() : Number.NaN);
  if (typeof raw === "boolean" || raw === "" || !Number.isFinite(value) || value < 0) {
    throw new ValueError(`expected a number >= 0, got ${show(raw)}`);
  }
  return value;
}

/** One of `allowed`, exactly as written (GitLab's enums are lower case). */
export function parseOneOf<const T extends string>(allowed: readonly T[]): (raw: unknown) => T {
  return (raw) => {
    const value = text(raw, `one of ${allowed.join(", ")}`);
    if (!(allowed as readonly string[]).includes(value)) {
      throw new ValueError(`expected one of ${allowed.join(", ")}, got ${show(raw)}`);
    }
    return value as T;
  };
}

function parsePort(portText: string, raw: unknown, expected: string): number {
  if (!/^\d{1,5}$/.test(portText)) throw new ValueError(`expected ${expected}, got ${show(raw)}`);
  const port = Number(portText);
  // 0 asks the system for a free port (tests, the demo); kas logs the bound addresses.
  if (port > 65535) throw new ValueError(`port must be 0-65535, got ${port}`);
  return port;
}

/** Splits "host:port", "[v6]:port" or ":port". */
function splitHostPort(raw: unknown, expected: string): { host: string; port: number } {
  const value = text(raw, expected);
  const m = /^(?:\[([0-9a-fA-F:.%a-zA-Z]+)\]|([^[\]:\s]*)):([^:]*)$/.exec(value);
  if (!m) throw new ValueError(`expected ${expected}, got ${show(raw)}`);
  return { host: m[1] ?? m[2] ?? "", port: parsePort(m[3] ?? "", raw, expected) };
}

/** "127.0.0.1:8150", "[::1]:8150", "kas.example.com:8150" or ":8150" (all interfaces). */
export function parseListenAddress(raw: unknown): ListenAddress {
  const { host, port } = splitHostPort(raw, "host:port");
  return { host: host === "" ? undefined : host, port };
}

/** "redis.example.com:6379": the host is required. */
export function parseEndpoint(raw: unknown): Endpoint {
  const { host, port } = splitHostPort(raw, "host:port");
  if (host === "") throw new ValueError(`expected host:port with a host, got ${show(raw)}`);
  return { host, port };
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Go-style durations, as GitLab's kas configuration writes them: "300s", "1m30s", "250ms", "1h". Milliseconds out. */
export function parseDuration(raw: unknown): number {
  const value = text(raw, 'a duration like "300s"');
  const parts = [...value.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== value) {
    throw new ValueError(`expected a duration like "300s", "1m30s" or "250ms", got ${show(raw)}`);
  }
  return Math.round(parts.reduce((ms, [, n, unit]) => ms + Number(n) * DURATION_UNITS[unit!]!, 0));
}

/** A duration above zero, as GitLab's kascfg requires of most of its durations. */
export function parsePositiveDuration(raw: unknown): number {
  const ms = parseDuration(raw);
  if (ms <= 0) throw new ValueError(`must be longer than 0, got ${show(raw)}`);
  return ms;
}

/** A list of host:port: a YAML sequence, or one string with commas (as an environment variable). */
export function parseEndpointList(raw: unknown): Endpoint[] {
  const items = Array.isArray(raw) ? raw : text(raw, "a list of host:port").split(",");
  const list = items.map((item) => (typeof item === "string" ? item.trim() : item)).filter((i) => i !== "");
  if (list.length === 0) throw new ValueError("expected at least one host:port");
  return list.map((item) => parseEndpoint(item));
}

export function parseNonNegativeInt(raw: unknown): number {
  const value = text(raw, "an integer >= 0");
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new ValueError(`expected an integer >= 0, got ${show(raw)}`);
  }
  return Number(value);
}

export function parsePositiveInt(raw: unknown): number {
  const value = text(raw, "a positive integer");
  if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
    throw new ValueError(`expected a positive integer, got ${show(raw)}`);
  }
  return Number(value);
}

export function parseBool(raw: unknown): boolean {
  if (typeof raw === "boolean") return raw;
  const value = text(raw, "true or false").toLowerCase();
  if (value === "true" || value === "1") return true;
  if (value === "false" || value === "0") return false;
  throw new ValueError(`expected true or false, got ${show(raw)}`);
}

/** An absolute URL with one of `schemes` (without the colon). Returned normalized. */
export function parseUrl(raw: unknown, schemes: readonly string[]): string {
  const value = text(raw, "a URL");
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValueError(`expected a ${schemes.join("/")} URL, got ${show(raw)}`);
  }
  const scheme = url.protocol.slice(0, -1);
  if (!schemes.includes(scheme)) {
    throw new ValueError(`expected a ${schemes.join("/")} URL, got scheme "${scheme}" in ${show(raw)}`);
  }
  if (url.username || url.password) throw new ValueError("must not contain credentials");
  return url.href;
}

/** An HTTP path such as "/metrics". */
export function parseUrlPath(raw: unknown): string {
  const value = text(raw, "a URL path");
  if (!/^\/[^\s?#]*$/.test(value))
    throw new ValueError(`expected a path starting with "/", got ${show(raw)}`);
  return value;
}

export function parseLogLevel(raw: unknown): LogLevel {
  const value = text(raw, "a log level").toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(value)) {
    throw new ValueError(`expected one of ${LOG_LEVELS.join(", ")}, got ${show(raw)}`);
  }
  return value as LogLevel;
}

/** PEM files that turn a listener into a TLS one (both or neither). */
export interface TlsFiles {
  certificateFile?: string;
  keyFile?: string;
}

/** Where a listener binds, and its TLS files if it serves TLS. */
export interface ListenConfig extends TlsFiles {
  address: ListenAddress;
}
