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
  const first = text[0];
  if (first === ".") return DOT_FLOAT.test(text) ? Number(text) : undefined;
  if (first === undefined || !/[-+0-9]/.test(first)) return undefined;
  const plain = text.replaceAll("_", "");
  if (GO_INT.test(plain)) return goInt(plain);
  return GO_FLOAT.test(plain) ? Number(plain) : undefined;
}

function goInt(plain: string): number {
  const negative = plain.startsWith("-");
  const digits = plain.replace(/^[-+]/, "");
  // Go reads a leading 0 as octal; JavaScript's Number() would not.
  const value = /^0[0-7]+$/.test(digits)
    ? Number.parseInt(digits, 8)
    : Number(digits.replace(/^0[oO]/, "0o"));
  return negative ? -value : value;
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

/** The options that read (and write) YAML as GitLab's kas reads it; `merge`: go-yaml v2 merges `<<`. */
export const GO_YAML_OPTIONS = {
  version: "1.2",
  schema: "failsafe",
  customTags: GO_YAML_SCALARS,
  merge: true,
} as const;
