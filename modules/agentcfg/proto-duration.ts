// google.protobuf.Duration as protojson reads and writes it ("3600s", "1.5s", "-0.000000001s"):
// the only duration form GitLab's kas takes in config.yaml. The reading is a port of protobuf-go's
// encoding/protojson parseDuration (v1.31, the version GitLab's v16 agent uses), so both refuse and
// accept the same text: an optional sign, digits without a leading zero, at most 9 fraction
// digits, a final "s", nothing else ("1m", " 1s", "1e3s" are refused; ".5s", "1.s", ".s" are not).

/** protojson's bound: ±10,000 years in seconds. */
export const MAX_DURATION_SECONDS = 315_576_000_000;
export const MAX_DURATION_MS = MAX_DURATION_SECONDS * 1000;

const DIGITS = /^[0-9]*$/;

/** Milliseconds (fractional below 1 ms) in protojson Duration `text`; undefined when protojson refuses it. */
export function parseProtoDuration(text: string): number | undefined {
  if (!text.endsWith("s")) return undefined;
  let b = text.slice(0, -1);
  const negative = b.startsWith("-");
  if (negative || b.startsWith("+")) b = b.slice(1);
  if (b === "") return undefined; // "s", "-s": no number at all (".s" is one)
  // Integer part: "0" alone, or digits not starting with 0, or none before a "."; whatever follows
  // must be the fraction.
  let intPart = "";
  if (b[0] === "0") b = b.slice(1);
  else {
    const end = b.search(/[^0-9]|$/);
    intPart = b.slice(0, end);
    b = b.slice(end);
  }
  let frac = "";
  if (b !== "") {
    if (b[0] !== "." || !DIGITS.test(b.slice(1)) || b.length - 1 > 9) return undefined;
    frac = b.slice(1);
  }
  const seconds = Number(intPart); // Number("") is 0
  if (seconds > MAX_DURATION_SECONDS) return undefined;
  const nanos = Number(frac.padEnd(9, "0"));
  const ms = seconds * 1000 + nanos / 1e6;
  return negative && ms !== 0 ? -ms : ms;
}

/**
 * `ms` as protojson writes a Duration: seconds with 0, 3, 6 or 9 fraction digits ("3600s",
 * "1.500s", "0.000001s", "-1.500s"). Precision: the nearest nanosecond.
 */
export function formatProtoDuration(ms: number): string {
  const sign = ms < 0 ? "-" : "";
  const abs = Math.abs(ms);
  // abs / 1000 is correctly rounded and below 2^53, so it never rounds up to a whole second that abs
  // has not reached: the remainder below is never negative.
  let seconds = Math.trunc(abs / 1000);
  let nanos = Math.round((abs - seconds * 1000) * 1e6);
  // The remainder may round up to a whole second (999.9999999 ms is "1s").
  if (nanos >= 1e9) {
    seconds += 1;
    nanos -= 1e9;
  }
  if (nanos === 0) return `${seconds === 0 ? "" : sign}${seconds}s`;
  let fraction = String(nanos).padStart(9, "0");
  // protojson trims whole groups of three zeros only.
  while (fraction.endsWith("000")) fraction = fraction.slice(0, -3);
  return `${sign}${seconds}.${fraction}s`;
}
