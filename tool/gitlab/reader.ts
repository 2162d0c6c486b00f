// Reading GitLab's JSON answers, which are input: every field is checked, and a body of another
// shape (GitLab and kas versions disagree, or something in between answered) is an `unavailable`
// GitLabError naming the field.
import { GitLabError } from "./errors.ts";

/** Field accessors that fail with the field's name. */
export class Reader {
  /** `what`: the answer, for messages, e.g. "agent_info response". */
  constructor(readonly what: string) {}

  fail(field: string, message: string): GitLabError {
    return new GitLabError("unavailable", `GitLab returned an unexpected ${this.what}: ${field}: ${message}`);
  }

  object(v: unknown, field: string): Record<string, unknown> {
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      throw this.fail(field || "(body)", `expected an object, got ${kind(v)}`);
    }
    return v as Record<string, unknown>;
  }

  string(o: Record<string, unknown>, key: string, prefix = "", allowEmpty = false): string {
    const v = o[key];
    if (typeof v !== "string") throw this.fail(prefix + key, `expected a string, got ${kind(v)}`);
    if (!allowEmpty && v === "") throw this.fail(prefix + key, "must not be empty");
    return v;
  }

  optionalString(
    o: Record<string, unknown>,
    key: string,
    prefix = "",
    allowEmpty = false,
  ): string | undefined {
    return o[key] === undefined || o[key] === null ? undefined : this.string(o, key, prefix, allowEmpty);
  }

  /** GitLab ids are positive integers; JSON numbers (or digit strings, for ids beyond 2^53). */
  id(o: Record<string, unknown>, key: string): string {
    const v = o[key];
    if (typeof v === "number" && Number.isSafeInteger(v) && v > 0) return String(v);
    if (typeof v === "string" && /^[1-9]\d*$/.test(v)) return v;
    throw this.fail(key, `expected a positive integer id, got ${kind(v)}`);
  }
}

function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "number") return `the number ${v}`;
  return typeof v;
}
