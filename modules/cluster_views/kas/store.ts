// The latest views of each agent, where every replica reads them: Redis when kas has it (one hash
// per agent; updates applied by a Lua script so that an older `seq` never overwrites a newer one,
// whichever replica writes), memory otherwise. The stream that last wrote an agent's views is its
// `owner`: while it is up the key lives `presenceTtlMs` past each refresh; once it ends, the views
// stay `retainMs` (shown as disconnected), then expire.
import { flat, inPipelines, type KasRedis, type RedisScript, redisScript } from "../../runtime/index.ts";
import { parseClusterViews } from "../limits.ts";
import { type AgentViews, type ClusterViews, VIEW_NAMES, type ViewName } from "../views.ts";
import type { OpenStream } from "./presence.ts";

export interface ViewsUpdate {
  /** The agent's sequence number (see the README: a hybrid logical clock, across leader terms). */
  seq: number;
  /** `views` holds every view that is on (others are removed); otherwise only those that changed. */
  snapshot: boolean;
  views: ClusterViews;
}

export type ApplyResult = "stale" | "applied" | "connected";

export interface StoreTimes {
  /** How long the views outlive the last refresh while the agent's stream is up. */
  presenceTtlMs: number;
  /** How long they stay after the stream ended. */
  retainMs: number;
}

export interface ViewsStore {
  /**
   * Applies `update` if its seq is newer than what is kept: "connected" when the agent was not
   * connected before (or through another stream), "applied", or "stale" (nothing written).
   */
  apply(agentId: string, owner: string, update: ViewsUpdate, at: string): Promise<ApplyResult>;
  /** `owner`'s stream ended: whether the agent became disconnected (false if another stream took over). */
  disconnect(agentId: string, owner: string): Promise<boolean>;
  /** These streams are still up: the views of the agents they own live on. */
  refresh(streams: readonly OpenStream[]): Promise<void>;
  get(agentId: string): Promise<AgentViews | undefined>;
  list(): Promise<AgentViews[]>;
}

/**
 * Each view as its JSON, as the Redis store keeps them: parsed, an agent's views take about twice
 * the memory (objects, arrays and numbers of their own), for every agent connected; a read parses them.
 */
type ViewsJson = Partial<Record<ViewName, string>>;

interface Entry {
  seq: number;
  updatedAt: string;
  owner: string;
  connected: boolean;
  views: ViewsJson;
  expiresAt: number;
}

const asViews = (e: Entry, agentId: string): AgentViews => {
  const views: Record<string, unknown> = {};
  for (const [name, json] of Object.entries(e.views)) views[name] = JSON.parse(json);
  return {
    agentId,
    connected: e.connected,
    seq: e.seq,
    updatedAt: e.updatedAt,
    views: views as ClusterViews,
  };
};

/** `base` (a copy) with the views of `update` set, in the order a spread would give them. */
function withViews(base: ViewsJson, update: ClusterViews): ViewsJson {
  const views: ViewsJson = { ...base };
  for (const [name, view] of Object.entries(update)) {
    if (view === undefined) delete views[name as ViewName];
    else views[name as ViewName] = flat(JSON.stringify(view)); // kept: not JSON.stringify's rope
  }
  return views;
}

/** Single-replica kas: a map, expired lazily on read and by a sweep. */
export class MemoryViewsStore implements ViewsStore {
  readonly #entries = new Map<string, Entry>();
  readonly #times: StoreTimes;
  readonly #now: () => number;

  constructor(times: StoreTimes, now: () => number = Date.now) {
    this.#times = times;
    this.#now = now;
  }

  #live(agentId: string): Entry | undefined {
    const e = this.#entries.get(agentId);
    if (e && e.expiresAt <= this.#now()) {
      this.#entries.delete(agentId);
      return undefined;
    }
    return e;
  }

  async apply(agentId: string, owner: string, update: ViewsUpdate, at: string): Promise<ApplyResult> {
    const e = this.#live(agentId);
    if (e && update.seq <= e.seq) return "stale";
    const wasConnected = e?.connected === true && e.owner === owner;
    const views = withViews(update.snapshot || !e ? {} : e.views, update.views);
    this.#entries.set(agentId, {
      seq: update.seq,
      updatedAt: at,
      owner,
      connected: true,
      views,
      expiresAt: this.#now() + this.#times.presenceTtlMs,
    });
    return wasConnected ? "applied" : "connected";
  }

  async disconnect(agentId: string, owner: string): Promise<boolean> {
    const e = this.#live(agentId);
    if (!e || e.owner !== owner || !e.connected) return false;
    e.connected = false;
    e.expiresAt = this.#now() + this.#times.retainMs;
    return true;
  }

  async refresh(streams: readonly OpenStream[]): Promise<void> {
    for (const [agentId, owner] of streams) {
      const e = this.#live(agentId);
      if (e && e.owner === owner && e.connected) e.expiresAt = this.#now() + this.#times.presenceTtlMs;
    }
  }

  async get(agentId: string): Promise<AgentViews | undefined> {
    const e = this.#live(agentId);
    return e && asViews(e, agentId);
  }

  async list(): Promise<AgentViews[]> {
    return [...this.#entries.keys()].flatMap((id) => {
      const e = this.#live(id);
      return e ? [asViews(e, id)] : [];
    });
  }
}

// KEYS[1]: the agent's hash. ARGV: seq, snapshot (0|1), updatedAt, owner, ttl ms, then field/JSON pairs.
// Returns 0 stale, 1 applied, 2 applied and now connected through this owner.
const APPLY = `
local cur = tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1')
if tonumber(ARGV[1]) <= cur then return 0 end
local was = redis.call('HMGET', KEYS[1], 'owner', 'connected')
if ARGV[2] == '1' then
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    if string.sub(f, 1, 2) == 'v:' then redis.call('HDEL', KEYS[1], f) end
  end
end
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'updatedAt', ARGV[3], 'owner', ARGV[4], 'connected', '1')
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if was[1] == ARGV[4] and was[2] == '1' then return 1 end
return 2
`;

// KEYS[1]; ARGV: owner, ttl ms. Returns 1 if the agent became disconnected.
const DISCONNECT = `
local was = redis.call('HMGET', KEYS[1], 'owner', 'connected')
if was[1] ~= ARGV[1] or was[2] ~= '1' then return 0 end
redis.call('HSET', KEYS[1], 'connected', '0')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

// KEYS[1]; ARGV: owner, ttl ms.
const REFRESH = `
local was = redis.call('HMGET', KEYS[1], 'owner', 'connected')
if was[1] == ARGV[1] and was[2] == '1' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;

const SCAN_COUNT = 500;

/**
 * Clustered kas: one hash per agent, `<prefix>cluster_views:<agent id>`. The refreshes of many
 * streams go together, in pipelines: one round trip for them all rather than one each.
 */
export class RedisViewsStore implements ViewsStore {
  readonly #redis: KasRedis;
  readonly #times: StoreTimes;
  readonly #prefix: string;
  readonly #refresh: RedisScript;

  constructor(redis: KasRedis, times: StoreTimes) {
    this.#redis = redis;
    this.#times = times;
    this.#prefix = `${redis.keyPrefix}cluster_views:`;
    this.#refresh = redisScript(redis.client, "kasClusterViewsRefresh", REFRESH);
  }

  async apply(agentId: string, owner: string, update: ViewsUpdate, at: string): Promise<ApplyResult> {
    const fields: string[] = [];
    for (const name of VIEW_NAMES) {
      const view = update.views[name];
      if (view !== undefined) fields.push(`v:${name}`, JSON.stringify(view));
    }
    const result = await this.#redis.client.eval(
      APPLY,
      1,
      this.#prefix + agentId,
      String(update.seq),
      update.snapshot ? "1" : "0",
      at,
      owner,
      String(this.#times.presenceTtlMs),
      ...fields,
    );
    return result === 0 ? "stale" : result === 1 ? "applied" : "connected";
  }

  async disconnect(agentId: string, owner: string): Promise<boolean> {
    const key = this.#prefix + agentId;
    return (await this.#redis.client.eval(DISCONNECT, 1, key, owner, String(this.#times.retainMs))) === 1;
  }

  async refresh(streams: readonly OpenStream[]): Promise<void> {
    const ttl = String(this.#times.presenceTtlMs);
    const err = await inPipelines(this.#redis.client, streams, (pipeline, [agentId, owner]) =>
      this.#refresh(pipeline, [this.#prefix + agentId], [owner, ttl]),
    );
    if (err) throw err;
  }

  async get(agentId: string): Promise<AgentViews | undefined> {
    return parseHash(agentId, await this.#redis.client.hgetall(this.#prefix + agentId));
  }

  async list(): Promise<AgentViews[]> {
    const { client } = this.#redis;
    const keys = new Set<string>();
    let cursor = "0";
    do {
      const [next, found] = await client.scan(cursor, "MATCH", `${this.#prefix}*`, "COUNT", SCAN_COUNT);
      for (const k of found) keys.add(k);
      cursor = next;
    } while (cursor !== "0");
    const ids = [...keys].map((k) => k.slice(this.#prefix.length)).filter((id) => /^[1-9]\d*$/.test(id));
    const pipeline = client.pipeline();
    for (const id of ids) pipeline.hgetall(this.#prefix + id);
    const answers = (await pipeline.exec()) ?? [];
    return ids.flatMap((id, i) => {
      const [err, hash] = answers[i] ?? [];
      return err ? [] : (parseHash(id, hash as Record<string, string>) ?? []);
    });
  }
}

/** An agent's hash as read back (shared: checked like any input); undefined if absent or broken. */
function parseHash(agentId: string, hash: Record<string, string>): AgentViews | undefined {
  const seq = Number(hash.seq);
  if (!Number.isSafeInteger(seq) || seq < 0 || hash.updatedAt === undefined) return undefined;
  const views: ClusterViews = {};
  for (const name of VIEW_NAMES) {
    const json = hash[`v:${name}`];
    if (json === undefined) continue;
    const parsed = parseClusterViews(`{"${name}":${json}}`);
    if ("views" in parsed) Object.assign(views, parsed.views);
  }
  return { agentId, connected: hash.connected === "1", seq, updatedAt: hash.updatedAt, views };
}
