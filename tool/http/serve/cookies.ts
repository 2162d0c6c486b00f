// Reading a request's Cookie header (RFC 6265 sections 4.2.1 and 5.4): `name=value` pairs separated
// by ";" (Node joins several Cookie headers with "; "). One reader for every front: the dashboard's
// session cookie, the Kubernetes API proxy's `_gitlab_kas`.
//
// - A pair's name is what comes before its first "=", its value all that follows (so a value may
//   hold "=", as base64 padding does); both are trimmed of surrounding whitespace. A piece without
//   "=" is not a pair and is skipped.
// - A value in double quotes (`name="value"`, which RFC 6265's grammar allows) is read without
//   them, as Go's net/http (GitLab's kas) reads it. Quotes inside a value are kept.
// - A name that appears more than once: the FIRST pair wins. Browsers send the cookie with the
//   longest (most specific) path first (section 5.4, step 2), and servers (net/http's
//   `Request.Cookie`, Rack) take the first too.
// - Names are case-sensitive. Nothing is decoded (percent-escapes are the caller's business) and
//   no character is refused: what a cookie may hold is checked where its value is used.

export interface Cookie {
  name: string;
  value: string;
}

/** Every cookie pair of a Cookie header, in order (names may repeat). */
export function readCookies(header: string | undefined): Cookie[] {
  const cookies: Cookie[] = [];
  if (header === undefined) return cookies;
  for (const piece of header.split(";")) {
    const pair = splitPair(piece);
    if (pair !== undefined) cookies.push(pair);
  }
  return cookies;
}

/** The value of the first cookie named `name` in a Cookie header; undefined without one. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const piece of header.split(";")) {
    const pair = splitPair(piece);
    if (pair?.name === name) return pair.value;
  }
  return undefined;
}

function splitPair(piece: string): Cookie | undefined {
  const eq = piece.indexOf("=");
  if (eq < 0) return undefined;
  return { name: piece.slice(0, eq).trim(), value: unquote(piece.slice(eq + 1).trim()) };
}

function unquote(value: string): string {
  return value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value;
}
