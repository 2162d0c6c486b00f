// What must never reach a log line: credentials by field name (pino's redaction, cheap) and
// credentials by shape inside any string (a JWT, a bearer header, a GitLab agent token) wherever
// they hide — messages, error texts, URLs.

export const REDACTED = "[REDACTED]";

/** Field paths pino censors (lowercase header names, as Node gives them). */
export const REDACT_PATHS: readonly string[] = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  "*.*.headers.authorization",
  'headers["gitlab-kas-api-request"]',
  '*.headers["gitlab-kas-api-request"]',
  'headers["private-token"]',
  '*.headers["private-token"]',
  "token",
  "*.token",
  "*.*.token",
  "secret",
  "*.secret",
  "password",
  "*.password",
  "cookie",
  "*.cookie",
];

const SHAPES: readonly [RegExp, string][] = [
  // JWS compact serialization: base64url JSON header ("eyJ") . payload . signature
  [/eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*/g, REDACTED],
  [/\b(Bearer|Basic)([ \t]+)[^\s"',;]+/gi, `$1$2${REDACTED}`],
  // The `Token` scheme only before something credential-like (8+ characters with a digit): the
  // word "token" is common in plain messages ("agent token is invalid").
  [/\b(Token)([ \t]+)(?=[^\s"',;]*\d)[^\s"',;]{8,}/gi, `$1$2${REDACTED}`],
  // GitLab token prefixes: agent (glagent-), personal access (glpat-), etc.
  [/\bgl[a-z]{2,8}-[A-Za-z0-9_.-]{8,}/g, REDACTED],
];

/** The string with every credential-shaped part replaced. */
export function scrubString(s: string): string {
  let out = s;
  for (const [re, replacement] of SHAPES) out = out.replace(re, replacement);
  return out;
}

/**
 * A copy of `value` with every string scrubbed; Errors become plain objects (message, stack and
 * code scrubbed). Depth-limited and cycle-safe: it runs on every log call.
 */
export function scrubValue(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value === "string") return scrubString(value);
  if (typeof value !== "object" || value === null) return value;
  if (depth > 8 || seen.has(value)) return "[...]";
  seen.add(value);
  if (value instanceof Error) {
    const e = value as Error & { code?: unknown; cause?: unknown };
    const out: Record<string, unknown> = { type: e.name, message: scrubString(e.message) };
    if (e.stack) out.stack = scrubString(e.stack);
    if (e.code !== undefined) out.code = scrubValue(e.code, depth + 1, seen);
    if (e.cause !== undefined) out.cause = scrubValue(e.cause, depth + 1, seen);
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, depth + 1, seen));
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return scrubValue((value as { toJSON(): unknown }).toJSON(), depth + 1, seen);
  }
  if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubValue(v, depth + 1, seen);
  return out;
}
