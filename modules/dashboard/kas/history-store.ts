// Each agent's recent history: its counts over time (one sample per bucket) and what changed, in
// Redis when kas has it (so that every replica shows the same; replicas hearing the same event
// write the same members, so their writes agree), in memory otherwise. Bounded either way:
// HISTORY_LIMITS below, and in memory at most `maxAgents` agents (the least recently written go).
import type { KasRedis } from "../../runtime/index.ts";
import type { AgentHistory, Change, Sample } from "../api.ts";

export const HISTORY_LIMITS = {
  /** One sample per bucket: the newest counts within it. */
  bucketMs: 20_000,
  /** Samples older than this go: 2 hours (360 buckets). */
  windowMs: 2 * 3600_000,
  /** Changes kept per agent (newest). */
  changes: 200,
  /** Agents kept in memory (single replica). */
  maxAgents: 1000,
} as const;

export interface HistoryStore {
  /** Sets the sample of its bucket (`sample.t` is the bucket's start). */
  sample(agentId: string, sample: Sample): Promise<void>;
  /** Records changes (the same change recorded twice is kept once). */
  changes(agentId: string, changes: Change[]): Promise<void>;
  history(agentId: string): Promise<AgentHistory>;
  /** The newest changes of these agents, newest first, at most `limit`. */
  latestChanges(agentIds: string[], limit: number): Promise<Change[]>;
}

export const bucketOf = (ms: number): number => ms - (ms % HISTORY_LIMITS.bucketMs);

const newestFirst = (a: Change, b: Change) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0);

export class MemoryHistoryStore implements HistoryStore {
  readonly #agents = new Map<string, { samples: Sample[]; changes: Change[]; keys: Set<string> }>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #agent(agentId: string) {
    let a = this.#agents.get(agentId);
    this.#agents.delete(agentId);
    a ??= { samples: [], changes: [], keys: new Set() };
    this.#agents.set(agentId, a);
    while (this.#agents.size > HISTORY_LIMITS.maxAgents)
      this.#agents.delete(this.#agents.keys().next().value!);
    return a;
  }

  async sample(agentId: string, sample: Sample): Promise<void> {
    const a = this.#agent(agentId);
    const last = a.samples.at(-1);
    if (last && last.t === sample.t) a.samples[a.samples.length - 1] = sample;
    else if (!last || last.t < sample.t) a.samples.push(sample);
    const oldest = this.#now() - HISTORY_LIMITS.windowMs;
    while (a.samples.length > 0 && a.samples[0]!.t < oldest) a.samples.shift();
  }

  async changes(agentId: string, changes: Change[]): Promise<void> {
    if (changes.length === 0) return;
    const a = this.#agent(agentId);
    for (const c of changes) {
      const key = JSON.stringify(c);
      if (a.keys.has(key)) continue;
      a.keys.add(key);
      a.changes.push(c);
    }
    a.changes.sort(newestFirst);
    for (const c of a.changes.splice(HISTORY_LIMITS.changes)) a.keys.delete(JSON.stringify(c));
  }

  async history(agentId: string): Promise<AgentHistory> {
    const a = this.#agents.get(agentId);
    const oldest = this.#now() - HISTORY_LIMITS.windowMs;
    return {
      agentId,
      samples: (a?.samples ?? []).filter((s) => s.t >= oldest),
      changes: [...(a?.changes ?? [])],
    };
  }

  async latestChanges(agentIds: string[], limit: number): Promise<Change[]> {
    return agentIds
      .flatMap((id) => this.#agents.get(id)?.changes.slice(0, limit) ?? [])
      .sort(newestFirst)
      .slice(0, limit);
  }
}

/**
 * Clustered kas: per agent a sorted set of samples (`…dashboard:samples:<id>`, scored by bucket)
 * and one of changes (`…dashboard:changes:<id>`, scored by time, the change's JSON as member, so
 * the same change written by two replicas is one). Both expire a window after their last write.
 */
export class RedisHistoryStore implements HistoryStore {
  readonly #redis: KasRedis;
  readonly #prefix: string;
  readonly #now: () => number;

  constructor(redis: KasRedis, now: () => number = Date.now) {
    this.#redis = redis;
    this.#prefix = `${redis.keyPrefix}dashboard:`;
    this.#now = now;
  }

  async sample(agentId: string, sample: Sample): Promise<void> {
    const key = `${this.#prefix}samples:${agentId}`;
    await this.#redis.client
      .multi()
      .zremrangebyscore(key, sample.t, sample.t)
      .zadd(key, sample.t, JSON.stringify(sample))
      .zremrangebyscore(key, "-inf", `(${this.#now() - HISTORY_LIMITS.windowMs}`)
      .pexpire(key, HISTORY_LIMITS.windowMs)
      .exec();
  }

  async changes(agentId: string, changes: Change[]): Promise<void> {
    if (changes.length === 0) return;
    const key = `${this.#prefix}changes:${agentId}`;
    const members = changes.flatMap((c) => [Date.parse(c.at) || 0, JSON.stringify(c)]);
    await this.#redis.client
      .multi()
      .zadd(key, ...members)
      .zremrangebyrank(key, 0, -HISTORY_LIMITS.changes - 1)
      .pexpire(key, HISTORY_LIMITS.windowMs)
      .exec();
  }

  async history(agentId: string): Promise<AgentHistory> {
    const [samples, changes] = await Promise.all([
      this.#redis.client.zrangebyscore(
        `${this.#prefix}samples:${agentId}`,
        this.#now() - HISTORY_LIMITS.windowMs,
        "+inf",
      ),
      this.#redis.client.zrevrange(`${this.#prefix}changes:${agentId}`, 0, HISTORY_LIMITS.changes - 1),
    ]);
    return { agentId, samples: parseAll<Sample>(samples), changes: parseAll<Change>(changes) };
  }

  async latestChanges(agentIds: string[], limit: number): Promise<Change[]> {
    const pipeline = this.#redis.client.pipeline();
    for (const id of agentIds) pipeline.zrevrange(`${this.#prefix}changes:${id}`, 0, limit - 1);
    const answers = (await pipeline.exec()) ?? [];
    return answers
      .flatMap(([err, members]) => (err ? [] : parseAll<Change>(members as string[])))
      .sort(newestFirst)
      .slice(0, limit);
  }
}

/** Members read back from Redis (shared: a broken one is skipped). */
function parseAll<T>(members: string[]): T[] {
  return members.flatMap((m) => {
    try {
      const v = JSON.parse(m) as unknown;
      return typeof v === "object" && v !== null ? [v as T] : [];
    } catch {
      return [];
    }
  });
}
