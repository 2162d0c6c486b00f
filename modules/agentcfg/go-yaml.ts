// Plain YAML scalars resolved as GitLab's kas resolves them. kas turns config.yaml into JSON with
// sigs.k8s.io/yaml, which reads YAML with go-yaml v2: YAML 1.1 booleans (`yes`, `on`, `y`, ...),
// Go integer syntax (`0x1F`, `017`, `0b101`, `1_000`), `<<` merge keys, and dates kept as text.
// What type a scalar gets decides what protojson makes of it (`branch: yes` is a boolean, which a
// string field refuses), so the types must be go-yaml's, not YAML 1.2's. The tables below are
// go-yaml v2.4's resolve.go.
import { Scalar, type ScalarTag } from "yaml";

const TRUE = /^(?:y|Y|yes|Yes|YES|true|True|TRUE|on|On|ON)$/;
const FALSE = /^(?:n|N|no|No|NO|false|False|FALSE|off|Off|OFF)$/;
const NULL = /^(?:~|null|Null|NULL)?$/;
const SPECIAL_FLOAT = /^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;

// strconv.ParseInt(s, 0, 64) syntax (underscores already removed).
const GO_INT = /^[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$/;
// go-yaml's yamlStyleFloat.
const GO_FLOAT = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$/;
const DOT_FLOAT = /^\.[0-9]+(?:[eE][-+]?[0-9]+)?$/;

/** The number go-yaml v2 reads in a plain scalar, or undefined when it stays a string. */
export function goYamlNumber(text: string): number | undefined {
  return goYamlNumberTyped(text)?.value;
}

/** The number in a plain scalar and whether go-yaml types it !!int or !!float. */
function goYamlNumberTyped(text: string): { tag: "int" | "float"; value: number } | undefined {
  const first = text[0];
  if (first === ".") return DOT_FLOAT.test(text) ? { tag: "float", value: Number(text) } : undefined;
  if (first === undefined || !/[-+0-9]/.test(first)) return undefined;
  const plain = text.replaceAll("_", "");
  if (GO_INT.test(plain)) {
    const value = goInt(plain);
    if (value !== undefined) return { tag: "int", value };
  }
  // Also a decimal integer past 64 bits: ParseInt and ParseUint fail, yamlStyleFloat reads it.
  return GO_FLOAT.test(plain) ? { tag: "float", value: Number(plain) } : undefined;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** strconv.ParseInt(s, 0, 64), then ParseUint (which takes no sign): undefined when both fail. */
function goInt(plain: string): number | undefined {
  const sign = /^[-+]/.test(plain) ? plain[0] : "";
  const digits = plain.slice(sign.length);
  // Go reads a leading 0 as octal; JavaScript's BigInt() would not.
  const magnitude = BigInt(
    /^0[0-7]+$/.test(digits) ? `0o${digits.slice(1)}` : digits.replace(/^0[oO]/, "0o"),
  );
  const value = sign === "-" ? -magnitude : magnitude;
  if (value < INT64_MIN || value > (sign === "" ? UINT64_MAX : INT64_MAX)) return undefined;
  return Number(value);
}

type GoYamlTag = "null" | "bool" | "int" | "float" | "str";

/** What go-yaml v2's resolve.go makes of a scalar's text without a tag: its type and value. */
export function goYamlResolve(text: string): { tag: GoYamlTag; value: unknown } {
  if (NULL.test(text)) return { tag: "null", value: null };
  if (TRUE.test(text)) return { tag: "bool", value: true };
  if (FALSE.test(text)) return { tag: "bool", value: false };
  if (SPECIAL_FLOAT.test(text)) return { tag: "float", value: specialFloat(text) };
  return goYamlNumberTyped(text) ?? { tag: "str", value: text };
}

/** A RegExp whose test() is a function: yaml picks a scalar's tag by `test`. */
class Matcher extends RegExp {
  constructor(private readonly match: (text: string) => boolean) {
    super("(?:)");
  }
  override test(text: string): boolean {
    return this.match(text);
  }
}

const scalar = (
  tag: string,
  test: RegExp,
  value: (text: string) => unknown,
  identify: (v: unknown) => boolean,
): ScalarTag => ({
  tag: `tag:yaml.org,2002:${tag}`,
  default: true,
  test,
  resolve: (text) => new Scalar(value(text)),
  identify,
  // Written back plain; a string that would read as one of these is quoted by yaml itself. The null
  // tag also identifies undefined (an unset list item), which must read back as null, not "undefined".
  stringify: ({ value: v }) => (isNull(v) ? "null" : typeof v === "number" ? goNumberText(v) : String(v)),
});

function goNumberText(n: number): string {
  if (Number.isNaN(n)) return ".nan";
  if (!Number.isFinite(n)) return n > 0 ? ".inf" : "-.inf";
  return String(n).replace("e+", "e");
}

const isNull = (v: unknown) => v === null || v === undefined;
const specialFloat = (text: string) =>
  /nan/i.test(text) ? Number.NaN : text.startsWith("-") ? -Infinity : Infinity;

/**
 * With the failsafe schema (maps, sequences, strings), plain scalars resolve as go-yaml v2 does;
 * `stringify` with the same options quotes every string GitLab would read as something else.
 */
export const GO_YAML_SCALARS: ScalarTag[] = [
  scalar("null", NULL, () => null, isNull),
  scalar(
    "bool",
    TRUE,
    () => true,
    (v) => v === true,
  ),
  scalar(
    "bool",
    FALSE,
    () => false,
    (v) => v === false,
  ),
  scalar("float", SPECIAL_FLOAT, specialFloat, (v) => typeof v === "number" && !Number.isFinite(v)),
  scalar(
    "int",
    new Matcher((t) => goYamlNumber(t) !== undefined),
    (t) => goYamlNumber(t),
    (v) => typeof v === "number",
  ),
];

/**
 * Explicit tags as go-yaml v2 reads them (decode.go's scalar, resolve.go's resolve): the text is
 * typed as if it were plain, and that type must be the tag's (an integer may be a !!float, read as
 * a float); anything else is an error there, so here too. Without these, yaml would read
 * `!!float 1.5` as text ("Unresolved tag": only the special floats carry that tag here) and
 * `!!timestamp` and `!!binary` as a Date and bytes, types GitLab never sees. Not `default`: they
 * never type a scalar that has no tag, and are found first by name.
 */
const explicit = (tag: string, resolve: ScalarTag["resolve"]): ScalarTag => ({
  tag: `tag:yaml.org,2002:${tag}`,
  default: false,
  resolve,
});

const typed = (tag: GoYamlTag) =>
  explicit(tag, (text, onError) => {
    const plain = goYamlResolve(text);
    if (plain.tag === tag || (tag === "float" && plain.tag === "int")) return plain.value;
    onError(`cannot decode !!${plain.tag} \`${text}\` as a !!${tag}`);
    return text;
  });

// go-yaml's allowedTimestampFormats as Go's time.Parse reads them: date, then optionally a time
// after T or t (with a zone: Z or +hh:mm) or after a space (without one).
const TIMESTAMP =
  /^(\d{4})-(\d{1,2})-(\d{1,2})(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d{1,9})?(?:Z|[-+](\d{2}):(\d{2}))| (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d{1,9})?)?$/;

/** Whether go-yaml's parseTimestamp accepts the text: the layout, and every field in its range. */
export function isGoYamlTimestamp(text: string): boolean {
  const m = TIMESTAMP.exec(text);
  if (!m) return false;
  const [year, month, day, h1, m1, s1, zh, zm, h2, m2, s2] = m
    .slice(1)
    .map((f) => (f === undefined ? 0 : Number(f)));
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  const hour = m[4] !== undefined ? h1! : h2!;
  const minute = m[4] !== undefined ? m1! : m2!;
  const second = m[4] !== undefined ? s1! : s2!;
  return (
    month! >= 1 &&
    month! <= 12 &&
    day! >= 1 &&
    day! <= daysInMonth &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 59 &&
    zh! <= 24 &&
    zm! <= 60
  );
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const GO_YAML_EXPLICIT: ScalarTag[] = [
  typed("null"),
  typed("bool"),
  typed("int"),
  typed("float"),
  // sigs.k8s.io/yaml reads into interface{}, where go-yaml leaves a timestamp as its text.
  explicit("timestamp", (text, onError) => {
    if (!isGoYamlTimestamp(text))
      onError(`cannot decode !!${goYamlResolve(text).tag} \`${text}\` as a !!timestamp`);
    return text;
  }),
  // Decoded into a string (Go's StdEncoding: padded; line breaks ignored).
  explicit("binary", (text, onError) => {
    const compact = text.replace(/[\r\n]/g, "");
    if (!BASE64.test(compact)) onError("!!binary value contains invalid base64 data");
    return Buffer.from(compact, "base64").toString("utf8");
  }),
];

/** The options that read (and write) YAML as GitLab's kas reads it; `merge`: go-yaml v2 merges `<<`. */
export const GO_YAML_OPTIONS = {
  version: "1.2",
  schema: "failsafe",
  customTags: [...GO_YAML_SCALARS, ...GO_YAML_EXPLICIT] as ScalarTag[],
  merge: true,
} as const;
