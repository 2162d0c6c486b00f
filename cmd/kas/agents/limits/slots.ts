import { randomUUID } from "node:crypto";
import {
  inPipelines,
  type KasRedis,
  type RedisScript,
  redisScript,
} from "../../../../modules/runtime/index.ts";

/**
 * Takes a slot for one tunnel unless the token already holds `limit`: drops the expired entries,
 * counts, adds. One script, so replicas reserving at the same moment cannot both take the last slot.
 * KEYS[1] the token's set; ARGV: now, the new entry's expiry, its name, limit, the set's TTL (ms).
 * Answers {1, count} when taken (count includes it), {0, count} when full.
 */
const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[4]) then return {0, n} end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {1, n + 1}
`;

/**
 * Writes a token's held entries again with a fresh expiry, and the set's TTL with them (one script:
 * the set is never left without its TTL). KEYS[1] the token's set; ARGV: the set's TTL (ms), the
 * entries' expiry, then the entries.
 */
const REWRITE = `
for i = 3, #ARGV do redis.call('ZADD', KEYS[1], ARGV[2], ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0
`;

/** A token's held entries, to be written again. */
type Rewrite = readonly [key: string, members: string[]];

export interface TunnelSlot {
  /** The tunnel is up: the slot is held (and refreshed) until `release`. */
  claim(): void;
  release(): void;
}

export interface SlotVerdict {
  /** Absent when the token already holds its limit. */
  slot?: TunnelSlot;
  /** The token's tunnels (and handshakes between authentication and upgrade), this one included if taken. */
  count: number;
}

/** One token key's entries in this process. */
interface TokenEntries {
  /** Entry -> expiry (Infinity once claimed: its tunnel's close ends it). */
  readonly entries: Map<string, number>;
  /** When they are next refreshed (and dropped if none is left). */
  due: number;
}

export interface TunnelSlotsOptions {
  limit: number;
  /** Counts across replicas; without it, in this process. */
  redis?: KasRedis;
  /** How long a held slot lives in Redis without a refresh (a replica that dies frees its slots then). Default 60 s. */
  liveTtlMs?: number;
  /** How long a slot taken at authentication waits for its tunnel before it frees itself. Default 15 s. */
  pendingTtlMs?: number;
  /** Redis could not count: this process's count decided instead. */
  onFallback?: (err: Error) => void;
}

/**
 * Concurrent tunnels per token. Each tunnel is an entry of the token's sorted set in Redis
 * (`agent_tunnels:<token key>`, member = replica:tunnel, score = expiry), so a count is exact across
 * replicas and the entries of a replica that died expire by themselves. This replica refreshes
 * each token's entries every third of their TTL, writing them again whole, so a Redis that lost
 * them (restarted, or down while tunnels came) learns them back. Each token has its own time in
 * the period: 10,000 tokens refreshed in one go held the event loop for 0.4-0.7 s. The tokens due
 * at one tick are written together, in one pipeline (a round trip, not one per token).
 *
 * Redis down: this process's own tunnels decide (the limit then holds per replica), for the same
 * reason as the connection rate: agents keep connecting, and a bound remains.
 */
export class TunnelSlots {
  readonly #limit: number;
  readonly #redis: KasRedis | undefined;
  readonly #liveTtl: number;
  readonly #pendingTtl: number;
  readonly #onFallback: ((err: Error) => void) | undefined;
  readonly #replica = randomUUID();
  /** Token key -> this process's entries for it and when they are next refreshed. */
  readonly #tokens = new Map<string, TokenEntries>();
  readonly #rewrite: RedisScript | undefined;
  #serial = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(o: TunnelSlotsOptions) {
    this.#limit = o.limit;
    this.#redis = o.redis;
    this.#rewrite = o.redis && redisScript(o.redis.client, "kasTunnelSlotsRewrite", REWRITE);
    this.#liveTtl = o.liveTtlMs ?? 60_000;
    this.#pendingTtl = o.pendingTtlMs ?? 15_000;
    this.#onFallback = o.onFallback;
  }

  start(): void {
    // A tick visits the keys that are due, about 1 % of them: small slices, not one burst.
    const tick = Math.max(20, Math.min(1000, this.#refreshMs / 100));
    this.#timer = setInterval(() => this.#refresh(), tick);
    this.#timer.unref();
  }

  get #refreshMs(): number {
    return this.#liveTtl / 3;
  }

  close(): void {
    clearInterval(this.#timer);
  }

  async reserve(key: string): Promise<SlotVerdict> {
    const member = `${this.#replica}:${++this.#serial}`;
    if (this.#redis !== undefined) {
      try {
        const [taken, count] = await this.#reserveShared(this.#redis, key, member);
        return taken ? { slot: this.#take(key, member), count } : { count };
      } catch (err) {
        this.#onFallback?.(err as Error);
      }
    }
    // Counted and taken in one synchronous step: no other handshake can come between.
    const count = this.#entries(key, Date.now()).size;
    if (count >= this.#limit) return { count };
    return { slot: this.#take(key, member), count: count + 1 };
  }

  async #reserveShared(redis: KasRedis, key: string, member: string): Promise<[boolean, number]> {
    if (redis.client.status !== "ready") throw new Error(`Redis connection is ${redis.client.status}`);
    const now = Date.now();
    const [taken, count] = (await redis.client.eval(
      RESERVE,
      1,
      this.#setKey(key),
      now,
      now + this.#pendingTtl,
      member,
      this.#limit,
      this.#liveTtl,
    )) as [number, number];
    return [taken === 1, count];
  }

  /** Records a slot taken for `key`: pending until its tunnel is up, expiring if it never is. */
  #take(key: string, member: string): TunnelSlot {
    const entries = this.#entries(key, Date.now());
    entries.set(member, Date.now() + this.#pendingTtl);
    this.#keep(key, entries);
    return this.#slot(key, member);
  }

  #slot(key: string, member: string): TunnelSlot {
    let released = false;
    return {
      claim: () => {
        if (released) return;
        // Set again even if its pending entry expired meanwhile: a tunnel that is up is counted.
        const entries = this.#tokens.get(key)?.entries ?? new Map<string, number>();
        entries.set(member, Number.POSITIVE_INFINITY);
        this.#keep(key, entries);
        this.#write([[key, [member]]]);
      },
      release: () => {
        if (released) return;
        released = true;
        const entries = this.#tokens.get(key)?.entries;
        entries?.delete(member);
        if (entries?.size === 0) this.#tokens.delete(key);
        this.#command((c) => c.zrem(this.#setKey(key), member));
      },
    };
  }

  /** This process's live entries for `key`, the expired pending ones dropped. */
  #entries(key: string, now: number): Map<string, number> {
    return live(this.#tokens.get(key)?.entries ?? new Map<string, number>(), now);
  }

  /** Records `key`'s entries (those #entries gave); a new key's first refresh falls anywhere in the period. */
  #keep(key: string, entries: Map<string, number>): void {
    if (!this.#tokens.has(key))
      this.#tokens.set(key, { entries, due: Date.now() + Math.random() * this.#refreshMs });
  }

  /** Rewrites the held entries of the keys that are due, all together; drops keys left with none. */
  #refresh(): void {
    const now = Date.now();
    const due: Rewrite[] = [];
    for (const [key, token] of this.#tokens) {
      if (token.due > now) continue;
      const entries = live(token.entries, now);
      if (entries.size === 0) {
        this.#tokens.delete(key);
        continue;
      }
      token.due = now + this.#refreshMs * (0.9 + 0.2 * Math.random());
      const held = [...entries].filter(([, expiry]) => expiry === Number.POSITIVE_INFINITY);
      if (held.length > 0) due.push([key, held.map(([member]) => member)]);
    }
    if (due.length > 0) this.#write(due);
  }

  /** (Re)writes held entries with a fresh expiry: one pipeline for them all (in chunks). */
  #write(rewrites: Rewrite[]): void {
    const rewrite = this.#rewrite;
    if (rewrite === undefined) return;
    const expiry = Date.now() + this.#liveTtl;
    this.#command((c) =>
      inPipelines(c, rewrites, (pipeline, [key, members]) =>
        rewrite(pipeline, [this.#setKey(key)], [this.#liveTtl, expiry, ...members]),
      ),
    );
  }

  /** Best effort: when Redis is down the refresh after it is back writes everything again. */
  #command(run: (client: KasRedis["client"]) => Promise<unknown>): void {
    const redis = this.#redis;
    if (redis === undefined || redis.client.status !== "ready") return;
    run(redis.client).catch(() => {});
  }

  #setKey(key: string): string {
    return `${this.#redis?.keyPrefix ?? ""}agent_tunnels:${key}`;
  }
}

/** `entries` with the expired (pending) ones dropped. */
function live(entries: Map<string, number>, now: number): Map<string, number> {
  for (const [member, expiry] of entries) if (expiry <= now) entries.delete(member);
  return entries;
}
