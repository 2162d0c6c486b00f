// GitLab's answers about an agent token shared by every kas replica through Redis, as GitLab's kas
// shares them (agent_info, project_info): a replica that dies hands its agents to the others, and
// they should not all ask GitLab again. The Redis key is a digest of the token (and of what else
// the answer is about, e.g. the project); the value is sealed (AES-256-GCM) with a key derived
// from the token by another hash, with the kind and scope as associated data, so whoever reads
// Redis learns neither the token nor the answer (which holds Gitaly's token), and an entry moved
// under another key does not open. Redis is an optimisation only: every failure reads as a miss.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import type { KasRedis } from "../../../modules/runtime/index.ts";
import { tokenDigest } from "../../../tool/agent-token.ts";

/** One kind of answer: its name in the Redis key, and its stored JSON form both ways. */
export interface SharedAnswerKind<A> {
  /** `agent_info`, `project_info`: the Redis key is `<keyPrefix><name>:<digest>`. */
  readonly name: string;
  encode(answer: A): unknown;
  /** The answer `stored` holds; undefined when it is not one (another version wrote it). */
  decode(stored: unknown): A | undefined;
}

export interface SharedAnswerCacheOptions {
  redis: KasRedis;
  /** Bound on each Redis round trip; past it, the cache reads as a miss. Default 1 s. */
  timeoutMs?: number;
  /** Current time in ms (the answers' expiry; Redis's own TTL only collects them). Default `Date.now`. */
  now?: () => number;
  /** Called with each Redis failure (the caller counts or logs it; nothing else happens). */
  onError?: (err: Error) => void;
}

/** A sealed value larger than this is neither written nor believed (an answer is well under 4 KiB). */
export const MAX_VALUE_BYTES = 16 * 1024;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Answers by (token, scope) in Redis, each with its own expiry. */
export class SharedAnswerCache {
  readonly #redis: KasRedis;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #onError: ((err: Error) => void) | undefined;

  constructor(o: SharedAnswerCacheOptions) {
    this.#redis = o.redis;
    this.#timeoutMs = o.timeoutMs ?? 1000;
    this.#now = o.now ?? Date.now;
    this.#onError = o.onError;
  }

  /**
   * The answer another replica (or this one) stored for `token` and `scope` (e.g. a project; ""
   * when the token alone names it) that has not expired; undefined otherwise.
   */
  async read<A>(kind: SharedAnswerKind<A>, token: string, scope = ""): Promise<A | undefined> {
    const sealed = await this.#call((c) => c.getBuffer(this.key(kind, token, scope)));
    if (sealed == null || sealed.length > MAX_VALUE_BYTES || sealed.length < IV_BYTES + TAG_BYTES)
      return undefined;
    const entry = open(sealed, token, aadOf(kind, scope));
    if (entry === undefined || !(entry.expiresAt > this.#now())) return undefined;
    return kind.decode(entry.answer);
  }

  /** Stores `answer` for `ttlMs`; resolves (never rejects) once Redis took it or failed. */
  async write<A>(
    kind: SharedAnswerKind<A>,
    token: string,
    answer: A,
    ttlMs: number,
    scope = "",
  ): Promise<void> {
    const sealed = seal(
      { expiresAt: this.#now() + ttlMs, answer: kind.encode(answer) },
      token,
      aadOf(kind, scope),
    );
    if (sealed.length > MAX_VALUE_BYTES) return;
    const key = this.key(kind, token, scope);
    await this.#call((c) => c.set(key, sealed, "PX", Math.max(1, Math.ceil(ttlMs))));
  }

  /** The Redis key: the token's SHA-256 alone, or a SHA-256 of it and the scope. */
  key(kind: SharedAnswerKind<unknown>, token: string, scope = ""): string {
    const digest =
      scope === ""
        ? tokenDigest(token)
        : createHash("sha256").update(tokenDigest(token)).update("\0").update(scope, "utf8").digest();
    return `${this.#redis.keyPrefix}${kind.name}:${digest.toString("base64url")}`;
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

type Entry = { expiresAt: number; answer: unknown };

/** What the entry is about, bound into its seal: it opens under its own kind and scope only. */
function aadOf(kind: SharedAnswerKind<unknown>, scope: string): Buffer {
  return Buffer.from(`${kind.name}\0${scope}`, "utf8");
}

/** The sealing key: a hash of the token other than the one that names the Redis key. */
function keyOf(token: string): Buffer {
  return createHash("sha256").update("gitlab-kas shared answer v1\0").update(token, "utf8").digest();
}

function seal(entry: Entry, token: string, aad: Buffer): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", keyOf(token), iv);
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(JSON.stringify(entry), "utf8"), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

/** The entry, or undefined when it was not sealed with this token's key and `aad`, or is not one. */
function open(sealed: Buffer, token: string, aad: Buffer): Entry | undefined {
  try {
    const decipher = createDecipheriv("aes-256-gcm", keyOf(token), sealed.subarray(0, IV_BYTES));
    decipher.setAAD(aad);
    decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    const text = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
    const entry = JSON.parse(text.toString("utf8")) as Record<string, unknown>;
    return typeof entry.expiresAt === "number" && "answer" in entry ? (entry as Entry) : undefined;
  } catch {
    return undefined;
  }
}
