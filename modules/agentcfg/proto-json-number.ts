// protojson takes an integer field as a JSON number or as a string holding one ("10", "1e3"), as
// long as its value is whole: protobuf-go's unmarshalInt and normalizeToIntString. No spaces,
// no leading zeros, no "+", no hexadecimal.

const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([-+]?[0-9]+))?$/;

/** The whole number in `text` as protojson reads a quoted integer, or undefined. */
export function protoJsonInteger(text: string): number | undefined {
  const m = JSON_NUMBER.exec(text);
  if (!m) return undefined;
  const intPart = m[1] === "0" ? "" : m[1]!;
  const frac = (m[2] ?? "").replace(/0+$/, "");
  const exp = Number(m[3] ?? 0);
  if (intPart === "" && frac === "") return 0;
  if (exp >= 0) {
    // Whole when the exponent moves every fraction digit left of the point.
    if (frac.length > exp || intPart.length + exp > 20) return undefined;
  } else {
    // Whole when only zeros move right of the point.
    const point = intPart.length + exp;
    if (frac !== "" || point < 0 || !/^0*$/.test(intPart.slice(point))) return undefined;
  }
  return Number(text);
}
