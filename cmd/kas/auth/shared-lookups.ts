// One lookup of GitLab at a time per key, behind the replicas' answers in Redis and this process's
// cache: Redis first; on a miss this process's cache, else GitLab, whose fresh answer (or
// definitive refusal) goes to Redis for its TTL. Only what this process got from GitLab itself is
// cached here, so an answer read from Redis is never held past Redis's expiry.
import { type AnswerCache, untilAborted } from "../../../tool/gitlab/index.ts";
import type { SharedAnswerCache, SharedAnswerKind } from "./shared-answer-cache.ts";

export type SharedOutcome<V, E> = { value: V } | { error: E };

/**
 * How an outcome is stored: `{ [valueKey]: value }`, or a refusal as `{ code, message }` with the
 * message cut at `maxMessage`. Reading back, `isValue` checks the value's shape and `refusal` makes
 * the error of a stored code (undefined for one that may not be shared); anything else, such as an
 * entry another version wrote, reads as no answer.
 */
export function outcomeKind<V, E extends Error & { code: string }>(o: {
  name: string;
  valueKey: string;
  isValue: (stored: Record<string, unknown>) => boolean;
  refusal: (code: string, message: string) => E | undefined;
  maxMessage: number;
}): SharedAnswerKind<SharedOutcome<V, E>> {
  const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null;
  return {
    name: o.name,
    encode: (answer) =>
      "value" in answer
        ? { [o.valueKey]: answer.value }
        : { code: answer.error.code, message: answer.error.message.slice(0, o.maxMessage) },
    decode(stored) {
      if (!isRecord(stored)) return undefined;
      const value = stored[o.valueKey];
      if (value !== undefined) return isRecord(value) && o.isValue(value) ? { value: value as V } : undefined;
      const { code, message } = stored;
      const error =
        typeof code === "string" && typeof message === "string" ? o.refusal(code, message) : undefined;
      return error && { error };
    },
  };
}

export interface SharedLookupsOptions<V, E extends Error> {
  shared: SharedAnswerCache;
  kind: SharedAnswerKind<SharedOutcome<V, E>>;
  /** This process's cache (it also shares concurrent GitLab lookups and answers while Redis is down). */
  local: AnswerCache<V, E>;
  ttlMs: number;
  errorTtlMs: number;
  /** Whether a refusal may be shared (never `unavailable`). */
  definitive: (err: unknown) => err is E;
}

export class SharedLookups<V, E extends Error> {
  /** Lookups in flight (Redis, then GitLab) by key: concurrent callers share one. */
  readonly #inFlight = new Map<string, Promise<V>>();

  constructor(private readonly o: SharedLookupsOptions<V, E>) {}

  /**
   * The answer for `token` and `scope` (the local `key` names both): shared with concurrent callers
   * of the key, so no single caller's `signal` cancels it; `signal` only stops this caller's wait.
   */
  get(key: string, token: string, scope: string, ask: () => Promise<V>, signal?: AbortSignal): Promise<V> {
    let flight = this.#inFlight.get(key);
    if (flight === undefined) {
      flight = this.#lookup(key, token, scope, ask);
      this.#inFlight.set(key, flight);
      void flight.catch(() => {}).finally(() => this.#inFlight.delete(key));
    }
    return untilAborted(flight, signal);
  }

  async #lookup(key: string, token: string, scope: string, ask: () => Promise<V>): Promise<V> {
    const { shared, kind, local } = this.o;
    const answer = await shared.read(kind, token, scope);
    if (answer !== undefined) {
      if ("value" in answer) return answer.value;
      throw answer.error;
    }
    let asked = false;
    const askGitLab = () => {
      asked = true;
      return ask();
    };
    try {
      const value = await local.get(key, askGitLab);
      // Only what GitLab just said goes to Redis: a local answer is older than a fresh TTL.
      if (asked) await shared.write(kind, token, { value }, this.o.ttlMs, scope);
      return value;
    } catch (err) {
      if (asked && this.o.definitive(err))
        await shared.write(kind, token, { error: err }, this.o.errorTtlMs, scope);
      throw err;
    }
  }
}
