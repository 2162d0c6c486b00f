import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/**
 * Headers that describe one connection, not the message (RFC 9110 7.6.1), plus those a proxy sets
 * itself (`host`; `expect`, which undici refuses and a relayed 100-continue would confuse): never
 * passed on by either daemon's proxy.
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

/** The header names a message's `Connection` header lists: hop-by-hop for that message too. */
export function connectionTokens(headers: IncomingHttpHeaders | OutgoingHttpHeaders): Set<string> {
  return new Set(
    String(headers.connection ?? "")
      .split(",")
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

/** Whether `name` (any case) may be passed on, given the message's Connection tokens. */
export function isEndToEnd(name: string, tokens: ReadonlySet<string>): boolean {
  const lower = name.toLowerCase();
  return !HOP_BY_HOP.has(lower) && !tokens.has(lower);
}
