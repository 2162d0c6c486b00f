// The one hop-by-hop rule of both daemons' proxies (kas's front toward the tunnel, agentk's
// forwarder toward the cluster), for plain and Upgrade requests and for responses alike.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/**
 * Headers that describe one connection, not the message (RFC 9110 7.6.1), plus those a proxy sets
 * itself (`host`; `expect`, which undici refuses and a relayed 100-continue would confuse): never
 * passed on by either daemon's proxy. A proxy that relays an Upgrade writes `Connection` and
 * `Upgrade` itself.
 */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
  "host",
]);

/**
 * The kas-to-agentk header that carries kas's decision of who the caller is (opaque here: the
 * module that decides encodes it, its agentk half reads it). kas writes it and drops any a client
 * sends; agentk reads it before any hop-by-hop rule and never passes it on.
 */
export const IDENTITY_HEADER = "kas-identity";

/** The header names a message's `Connection` header(s) list, lowercase: hop-by-hop for that message too. */
export function connectionTokens(value: string | readonly string[] | undefined): Set<string> {
  const tokens = new Set<string>();
  for (const line of typeof value === "string" ? [value] : (value ?? []))
    for (const t of line.split(",")) {
      const token = t.trim().toLowerCase();
      if (token !== "") tokens.add(token);
    }
  return tokens;
}

/** Whether `name` (any case) may be passed on, given the message's Connection tokens. */
export function isEndToEnd(name: string, tokens: ReadonlySet<string>): boolean {
  const lower = name.toLowerCase();
  return !HOP_BY_HOP.has(lower) && !tokens.has(lower);
}

/**
 * The end-to-end lines of a raw request header list (`[name, value, …]` as node:http's
 * `rawHeaders`): without the hop-by-hop ones, those its Connection headers name, the identity
 * header (only the proxy itself ever writes it), and those `drop` refuses (given the lowercase
 * name). An Upgrade request also loses `content-length`: the bytes after its head belong to the
 * upgraded protocol (as node:http reads them), so no hop may take any of them for a body. Order,
 * case and repeated lines are kept.
 */
export function endToEndLines(
  raw: readonly string[],
  o: { upgrade?: boolean; drop?: (lowerName: string) => boolean } = {},
): string[] {
  const connection: string[] = [];
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i]!.toLowerCase() === "connection") connection.push(raw[i + 1]!);
  const tokens = listedTokens(connection);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || tokens.has(lower) || lower === IDENTITY_HEADER || o.drop?.(lower)) continue;
    if (o.upgrade && lower === "content-length") continue;
    out.push(name, raw[i + 1]!);
  }
  return out;
}

const NO_TOKENS: ReadonlySet<string> = new Set();
const CLOSE: ReadonlySet<string> = new Set(["close"]);

/**
 * {@link connectionTokens} of a message's Connection values, as far as they
 * matter beside {@link HOP_BY_HOP}: the usual lone `keep-alive` (hop-by-hop anyway) or `close`
 * are answered without parsing or a new Set, on every request and response of both proxies.
 */
function listedTokens(values: readonly string[]): ReadonlySet<string> {
  if (values.length === 0) return NO_TOKENS;
  if (values.length === 1) {
    const v = values[0]!;
    if (v === "keep-alive" || v === "Keep-Alive") return NO_TOKENS;
    if (v === "close" || v === "Close") return CLOSE;
  }
  return connectionTokens(values);
}

/** Header lines as node:http's outgoing headers: lowercase names, a repeated name as a list (sent as repeated lines). */
export function linesToHeaders(lines: readonly string[]): OutgoingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < lines.length; i += 2) {
    const name = lines[i]!.toLowerCase();
    const value = lines[i + 1]!;
    const had = out[name];
    if (had === undefined) out[name] = value;
    else if (typeof had === "string") out[name] = [had, value];
    else had.push(value);
  }
  return out;
}

/**
 * `headers` (an object, as of a response) without the hop-by-hop ones and those its Connection
 * names. Names in any case: an outgoing object may spell it `Connection`.
 */
export function endToEnd(headers: IncomingHttpHeaders | OutgoingHttpHeaders): OutgoingHttpHeaders {
  const names = Object.keys(headers);
  const connection: string[] = [];
  for (const name of names) {
    const value = headers[name];
    if (value === undefined || name.toLowerCase() !== "connection") continue;
    if (Array.isArray(value)) for (const v of value) connection.push(String(v));
    else connection.push(String(value));
  }
  const tokens = listedTokens(connection);
  const out: OutgoingHttpHeaders = {};
  for (const name of names) {
    const value = headers[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (!HOP_BY_HOP.has(lower) && !tokens.has(lower)) out[lower] = value;
  }
  return out;
}
