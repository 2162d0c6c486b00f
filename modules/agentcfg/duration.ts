// Durations as GitLab's config.yaml writes them. GitLab decodes them as protobuf Durations (JSON form
// "3600s"); people also write Go's time.ParseDuration form ("1m", "1h30m", "250ms"), which we accept
// as well, as a superset. The parsed value is a number of milliseconds (fractional only for
// sub-millisecond input such as "1500us").

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3, // U+00B5 micro sign, as Go accepts
  μs: 1e-3, // U+03BC Greek mu, as Go accepts
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

const WHOLE = /^(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/;
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g;

/** Milliseconds in `text`, or undefined when it is not a non-negative duration. */
export function parseDuration(text: string): number | undefined {
  const s = text.startsWith("+") ? text.slice(1) : text;
  if (s === "0") return 0; // Go's one unit-less form
  if (!WHOLE.test(s)) return undefined;
  let ms = 0;
  for (const [, amount, unit] of s.matchAll(PART)) ms += Number(amount) * UNIT_MS[unit!]!;
  // Go caps durations at ~292 years; anything beyond a safe integer of ms is a typo, not a timeout.
  return Number.isFinite(ms) && ms <= Number.MAX_SAFE_INTEGER ? ms : undefined;
}
