// GitLab's agent_info answers shared by every kas replica through Redis, as GitLab's kas shares
// them: a replica that dies hands its agents to the others, and they should not all ask GitLab
// again. The key is the SHA-256 of the token; the value is sealed (AES-256-GCM) with a key derived
// from the token by another hash, so whoever reads Redis learns neither the token nor the answer
// (which holds the Gitaly token). Redis is an optimisation only: every failure reads as a miss.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import type { KasRedis } from "../../../modules/runtime/index.ts";
import { tokenDigest } from "../../../tool/agent-token.ts";
import { AgentAuthError, type AgentAuthErrorCode } from "./errors.ts";
import type { AgentInfo } from "./types.ts";

/** A cached answer: who the token is, or GitLab's definitive refusal. */
export type SharedAnswer = { info: AgentInfo } | { error: AgentAuthError };

export interface SharedInfoCacheOptions {
  redis: KasRedis;
  /** Bound on each Redis round trip; past it, the cache reads as a miss. Default 1 s. */
  timeoutMs?: number;
  /** Current time in ms (the answers' expiry; Redis's own TTL only collects them). Default `Date.now`. */
  now?: () => number;
  /** Called with each Redis failure (the caller counts or logs it; nothing else happens). */
  onError?: (err: Error) => void;
}

/** A sealed value larger than this is neither written nor believed (an agent_info is well under 2 KiB). */
export const MAX_VALUE_BYTES = 16 * 1024;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const DEFINITIVE: ReadonlySet<string> = new Set<AgentAuthErrorCode>([
  "unauthenticated",
  "permission_denied",
  "not_found",
]);

/** Answers by token in Redis under `<keyPrefix>agent_info:<digest>`, each with its own expiry. */
export class SharedInfoCache {
  readonly #redis: KasRedis;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #onError: ((err: Error) => void) | undefined;

  constructor(o: SharedInfoCacheOptions) {
    this.#redis = o.redis;
    this.#timeoutMs = o.timeoutMs ?? 1000;
    this.#now = o.now ?? Date.now;
    this.#onError = o.onError;
  }

  /** The answer another replica (or this one) stored and that has not expired; undefined otherwise. */
  async read(token: string): Promise<SharedAnswer | undefined> {
    const sealed = await this.#call((c) => c.getBuffer(this.#key(token)));
    if (sealed == null || sealed.length > MAX_VALUE_BYTES || sealed.length < IV_BYTES + TAG_BYTES)
      return undefined;
    const entry = open(sealed, token);
    if (entry === undefined || !(entry.expiresAt > this.#now())) return undefined;
    if ("info" in entry) return { info: entry.info };
    return { error: new AgentAuthError(entry.code, entry.message) };
  }

  /** Stores `answer` for `ttlMs`; resolves (never rejects) once Redis took it or failed. */
  async write(token: string, answer: SharedAnswer, ttlMs: number): Promise<void> {
    const expiresAt = this.#now() + ttlMs;
    const entry: Entry =
      "info" in answer
        ? { expiresAt, info: answer.info }
        : { expiresAt, code: answer.error.code, message: answer.error.message.slice(0, 500) };
    const sealed = seal(entry, token);
    if (sealed.length > MAX_VALUE_BYTES) return;
    await this.#call((c) => c.set(this.#key(token), sealed, "PX", Math.max(1, Math.ceil(ttlMs))));
  }

  #key(token: string): string {
    return `${this.#redis.keyPrefix}agent_info:${tokenDigest(token).toString("base64url")}`;
  }

  /** `run` on a ready connection within the deadline; undefined (and `onError`) on any failure. */
  async #call<T>(run: (client: KasRedis["client"]) => Promise<T>): Promise<T | undefined> {
    const { client } = this.#redis;
    let timer: NodeJS.Timeout | undefined;
    try {
      if (client.status !== "ready") throw new Error(`Redis connection is ${client.status}`);
      return await Promise.race([
        run(client),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`Redis: no answer within ${this.#timeoutMs} ms`)),
            this.#timeoutMs,
          );
        }),
      ]);
    } catch (err) {
      this.#onError?.(err as Error);
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}

type Entry =
  | { expiresAt: number; info: AgentInfo }
  | { expiresAt: number; code: AgentAuthErrorCode; message: string };

/** The sealing key: a hash of the token other than the one that names the Redis key. */
function keyOf(token: string): Buffer {
  return createHash("sha256").update("gitlab-kas agent_info cache v1\0").update(token, "utf8").digest();
}

function seal(entry: Entry, token: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", keyOf(token), iv);
  const body = Buffer.concat([cipher.update(JSON.stringify(entry), "utf8"), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

/** The entry, or undefined when it was not sealed with this token's key or is not one. */
function open(sealed: Buffer, token: string): Entry | undefined {
  try {
    const decipher = createDecipheriv("aes-256-gcm", keyOf(token), sealed.subarray(0, IV_BYTES));
    decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    const text = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
    const entry = JSON.parse(text.toString("utf8")) as Record<string, unknown>;
    if (typeof entry.expiresAt !== "number") return undefined;
    const info = entry.info as Record<string, unknown> | undefined;
    if (info !== undefined) {
      const ids = [info.agentId, info.projectId, info.agentName];
      return ids.every((v) => typeof v === "string") ? (entry as Entry) : undefined;
    }
    return typeof entry.code === "string" && DEFINITIVE.has(entry.code) && typeof entry.message === "string"
      ? (entry as Entry)
      : undefined;
  } catch {
    return undefined;
  }
}
