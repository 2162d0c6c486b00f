import type { IncomingMessage } from "node:http";
import { HttpError } from "./http-error.ts";

/** A request target's path (dot segments resolved) and query string, parsed without throwing. */
export interface RequestTarget {
  /** Still percent-encoded: decode segments with {@link decodePathSegment}. */
  pathname: string;
  /** `?…` or "". */
  search: string;
  query: URLSearchParams;
}

/** Parses `req.url`; a target that is no URL at all (e.g. `http://[`) is a 400. */
export function requestTarget(req: IncomingMessage): RequestTarget {
  let url: URL;
  try {
    url = new URL(req.url ?? "/", "http://kas");
  } catch {
    throw new HttpError(400, "malformed request target");
  }
  return { pathname: url.pathname, search: url.search, query: url.searchParams };
}

/**
 * `decodeURIComponent` for one path segment, the part named `what` (e.g. "service name");
 * a malformed percent-encoding (`%E0%A4%A`) is the caller's mistake: a 400 saying so.
 */
export function decodePathSegment(segment: string, what: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    const shown = segment.length > 100 ? `${segment.slice(0, 100)}…` : segment;
    throw new HttpError(400, `malformed percent-encoding in the ${what} "${shown}"`);
  }
}

/**
 * Whether a raw request target is origin-form with no dot segment (`.`, `..`, raw or
 * percent-encoded) and no encoded separator (`%2F`, `%5C`) or backslash in its path. A proxy that
 * appends the path to a base (an API server behind a path prefix) passes on only such targets:
 * whatever normalises the path later cannot take it out from under the base.
 */
export function isPlainPath(target: string): boolean {
  // Most targets have no dot, percent sign or backslash in their path: nothing to look into.
  if (NOTHING_TO_RESOLVE.test(target)) return true;
  const query = target.indexOf("?");
  const path = query < 0 ? target : target.slice(0, query);
  if (!path.startsWith("/") || path.includes("\\") || /%(2f|5c)/i.test(path)) return false;
  for (const segment of path.split("/")) {
    const dots = segment.replace(/%2e/gi, ".");
    if (dots === "." || dots === "..") return false;
  }
  return true;
}

/** An origin-form path without a dot, percent sign or backslash (then a query or the end): plain at a glance. */
const NOTHING_TO_RESOLVE = /^\/[^?.%\\]*(?:\?|$)/;
