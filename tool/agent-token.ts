import { createHash } from "node:crypto";
import { inspect } from "node:util";

/** SHA-256 of a token: a cache key and a log-safe fingerprint that cannot be turned back into the token. */
export function tokenDigest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** The first 12 hex digits of the digest: enough to correlate log lines, useless to an attacker. */
export function tokenFingerprint(token: string): string {
  return tokenDigest(token).toString("hex").slice(0, 12);
}

/**
 * An agent token carried along with the agent's identity (later calls to GitLab need it) that
 * serializes, prints and logs as "[REDACTED]".
 */
export class AgentToken {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The token itself, for an Authorization header. */
  reveal(): string {
    return this.#value;
  }

  get fingerprint(): string {
    return tokenFingerprint(this.#value);
  }

  toJSON(): string {
    return "[REDACTED]";
  }

  toString(): string {
    return "[REDACTED]";
  }

  [inspect.custom](): string {
    return "AgentToken [REDACTED]";
  }
}
