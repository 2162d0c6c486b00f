import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import { RegistryUnavailableError } from "./errors.ts";

export const DEFAULT_KEY_PREFIX = "kas:router:";

export interface RedisRegistryOptions {
  /** Connection for commands (see `createRedisClients`); the registry connects and closes it. */
  commands: Redis;
  /** Connection for pub/sub only. */
  subscriber: Redis;
  /** Prefix of every key and channel. Default "kas:router:". */
  keyPrefix?: string;
  /** This replica's id, unique in the cluster. */
  replicaId: string;
  /** The private URL other replicas dial to reach this one. */
  url: string;
  /** How long this replica counts as alive without a refresh. Default 15 s. */
  livenessTtlMs?: number;
  /** Default a third of `livenessTtlMs`. */
  livenessRefreshMs?: number;
  /** How long an agent entry lives without a refresh. Default 5 min. */
  agentTtlMs?: number;
  /** Default 40% of `agentTtlMs`. */
  agentRefreshMs?: number;
}

/** A replica that says it holds a tunnel to the agent. */
export interface Candidate {
  replicaId: string;
  url: string;
}

/** What a live replica said about one of its agents (`describe`). */
export interface AgentDescription {
  replicaId: string;
  agentId: string;
  info: string;
}

export interface RedisRegistryEvents {
  /** Another replica registered a tunnel to `agentId`. */
  announce: [agentId: string, candidate: Candidate];
  /** Everything this replica holds was written again (after connecting, or after a failure). */
  republished: [agents: number];
  /** The command connection is up (again); a republish follows. */
  up: [];
  /**
   * Announcements are heard (again): what was announced while they were not (another replica
   * republishing after Redis came back) was missed, so waiters should look again.
   */
  listening: [];
  /** The command connection was lost; lookups fail fast until it is back. */
  down: [];
  /** A Redis failure; the registry carries on and repairs itself when Redis is back. */
  error: [err: Error];
}

/**
 * Where the agents are, cluster-wide. Keys (P = prefix):
 * - `P replica:<id>` = private URL, with a short TTL (liveness), refreshed every few seconds:
 *   O(replicas) writes per second, whatever the number of agents.
 * - `P agent:<agentId>` = hash replica id -> expiry (epoch ms), key TTL = agent TTL. Each entry
 *   is written on registration and refreshed rarely (HSET + PEXPIRE per agent per refresh), so
 *   agents cost 2 commands per refresh period each, spread evenly over the period.
 * - channel `P announce`: one message per new tunnel, so waiting replicas need not poll.
 * - `P replicas` = set of replica ids, and `P info:<id>` = hash agent id -> what that replica says
 *   about the agent (`describe`), with the liveness TTL: listing agents cluster-wide reads one hash
 *   per live replica.
 * A lookup keeps the entries not expired whose replica's liveness key still exists, so a crashed
 * replica drops out within the liveness TTL even though its agent entries linger until theirs.
 */
export class RedisRegistry extends EventEmitter<RedisRegistryEvents> {
  readonly replicaId: string;
  readonly url: string;
  readonly #commands: Redis;
  readonly #subscriber: Redis;
  readonly #prefix: string;
  readonly #channel: string;
  readonly #livenessTtl: number;
  readonly #livenessRefresh: number;
  readonly #agentTtl: number;
  readonly #agentRefresh: number;
  /** Agents held here -> when their entry is next refreshed (epoch ms). */
  readonly #held = new Map<string, number>();
  /** What this replica says about its agents (`describe`). */
  readonly #infos = new Map<string, string>();
  #livenessDue = 0;
  #dirty = true;
  #republishing = false;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(o: RedisRegistryOptions) {
    super();
    this.replicaId = o.replicaId;
    this.url = o.url;
    this.#commands = o.commands;
    this.#subscriber = o.subscriber;
    this.#prefix = o.keyPrefix ?? DEFAULT_KEY_PREFIX;
    this.#channel = `${this.#prefix}announce`;
    this.#livenessTtl = o.livenessTtlMs ?? 15_000;
    this.#livenessRefresh = o.livenessRefreshMs ?? Math.round(this.#livenessTtl / 3);
    this.#agentTtl = o.agentTtlMs ?? 300_000;
    this.#agentRefresh = o.agentRefreshMs ?? Math.round(this.#agentTtl * 0.4);
    if (!(this.#livenessRefresh < this.#livenessTtl && this.#agentRefresh < this.#agentTtl)) {
      throw new RangeError("redis registry: each refresh interval must be shorter than its TTL");
    }
    this.#commands.on("ready", () => {
      this.emit("up");
      void this.#republish();
    });
    this.#commands.on("close", () => {
      if (!this.#stopped) this.emit("down");
    });
    this.#commands.on("error", (err) => this.emit("error", err));
    this.#subscriber.on("error", (err) => this.emit("error", err));
    this.#subscriber.on("message", (channel, message) => this.#onMessage(channel, message));
    this.#subscriber.on("ready", () => {
      this.#subscriber.subscribe(this.#channel).then(
        () => this.emit("listening"),
        (err: Error) => this.emit("error", err),
      );
    });
  }

  /** True while commands can be sent. */
  get connected(): boolean {
    return this.#commands.status === "ready";
  }

  /** Agents whose entries this replica keeps up. */
  get held(): number {
    return this.#held.size;
  }

  /**
   * Connects and subscribes. Does not fail when Redis is down: local routing works without it,
   * and everything held is published once it is up.
   */
  async start(): Promise<void> {
    const tick = Math.max(20, Math.min(1000, this.#livenessRefresh / 4, this.#agentRefresh / 4));
    this.#timer = setInterval(() => this.#tick(), tick);
    this.#timer.unref();
    this.#subscriber.connect().catch(() => {}); // reconnects by itself; errors come as 'error'
    await this.#commands.connect().catch(() => {});
  }

  /** Publishes that this replica holds a tunnel to `agentId`, and announces it. */
  hold(agentId: string): void {
    // The first refresh falls anywhere in the period, so refreshes of agents registered
    // together (a restart) spread evenly instead of arriving in one burst per period.
    this.#held.set(agentId, Date.now() + Math.random() * this.#agentRefresh);
    if (!this.connected) return;
    const announcement = JSON.stringify({ agentId, replicaId: this.replicaId, url: this.url });
    const p = this.#commands.pipeline();
    this.#writeAgent(p, agentId);
    p.publish(this.#channel, announcement);
    this.#exec(p);
  }

  /** Withdraws this replica's entry for `agentId` (no tunnel left here). */
  release(agentId: string): void {
    if (!this.#held.delete(agentId) || !this.connected) return;
    this.#commands.hdel(this.#agentKey(agentId), this.replicaId).catch((err: Error) => this.#failed(err));
  }

  /**
   * Publishes what this replica says about `agentId` (any text, e.g. JSON), or withdraws it
   * (`undefined`). Every replica lists it with `described()` while this one is alive.
   */
  describe(agentId: string, info: string | undefined): void {
    const key = this.#infoKey(this.replicaId);
    if (info === undefined) {
      if (!this.#infos.delete(agentId) || !this.connected) return;
      this.#commands.hdel(key, agentId).catch((err: Error) => this.#failed(err));
      return;
    }
    this.#infos.set(agentId, info);
    if (!this.connected) return;
    const p = this.#commands.pipeline();
    p.hset(key, agentId, info);
    p.pexpire(key, this.#livenessTtl);
    this.#exec(p);
  }

  /**
   * What every live replica (this one included) has said about its agents. Fails fast with
   * RegistryUnavailableError when Redis cannot answer.
   */
  async described(): Promise<AgentDescription[]> {
    if (!this.connected) throw new RegistryUnavailableError(`Redis connection is ${this.#commands.status}`);
    try {
      const ids = await this.#commands.smembers(this.#replicasKey);
      if (ids.length === 0) return [];
      const urls = await this.#commands.mget(ids.map((id) => this.#replicaKey(id)));
      const gone = ids.filter((_, i) => !urls[i]);
      if (gone.length > 0) this.#commands.srem(this.#replicasKey, ...gone).catch(() => {});
      const live = ids.filter((_, i) => urls[i]);
      const p = this.#commands.pipeline();
      for (const id of live) p.hgetall(this.#infoKey(id));
      const results = (await p.exec()) ?? [];
      return live.flatMap((replicaId, i) => {
        const [err, hash] = results[i] ?? [new Error("no reply")];
        if (err) throw err;
        return Object.entries(hash as Record<string, string>).map(([agentId, info]) => ({
          replicaId,
          agentId,
          info,
        }));
      });
    } catch (err) {
      throw new RegistryUnavailableError(`Redis: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Other live replicas that hold a tunnel to `agentId`, in random order (spreads load).
   * Fails fast with RegistryUnavailableError when Redis cannot answer.
   */
  async lookup(agentId: string): Promise<Candidate[]> {
    if (!this.connected) throw new RegistryUnavailableError(`Redis connection is ${this.#commands.status}`);
    try {
      const key = this.#agentKey(agentId);
      const entries = await this.#commands.hgetall(key);
      const now = Date.now();
      const expired = Object.keys(entries).filter((id) => Number(entries[id]) <= now);
      if (expired.length > 0) this.#commands.hdel(key, ...expired).catch(() => {});
      const ids = Object.keys(entries).filter((id) => id !== this.replicaId && Number(entries[id]) > now);
      if (ids.length === 0) return [];
      const urls = await this.#commands.mget(ids.map((id) => this.#replicaKey(id)));
      const live = ids.flatMap((replicaId, i) => (urls[i] ? [{ replicaId, url: urls[i] }] : []));
      return shuffle(live);
    } catch (err) {
      throw new RegistryUnavailableError(`Redis: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Stops refreshing. With `unpublish` (graceful shutdown) this replica's entries are removed
   * first; without it they are left to expire, as after a crash.
   */
  async close(options: { unpublish?: boolean } = {}): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#timer);
    if (options.unpublish !== false && this.connected) {
      const p = this.#commands.pipeline();
      for (const agentId of this.#held.keys()) p.hdel(this.#agentKey(agentId), this.replicaId);
      p.del(this.#replicaKey(this.replicaId), this.#infoKey(this.replicaId));
      p.srem(this.#replicasKey, this.replicaId);
      await p.exec().catch(() => {});
    }
    this.#held.clear();
    this.#infos.clear();
    this.#subscriber.disconnect();
    this.#commands.disconnect();
  }

  #tick(): void {
    if (!this.connected) return;
    if (this.#dirty) return void this.#republish();
    const now = Date.now();
    const p = this.#commands.pipeline();
    if (now >= this.#livenessDue) this.#writeLiveness(p, now);
    for (const [agentId, due] of this.#held) {
      if (due > now) continue;
      this.#writeAgent(p, agentId);
      this.#held.set(agentId, now + this.#agentRefresh * (0.9 + 0.2 * Math.random()));
    }
    if (p.length > 0) this.#exec(p);
  }

  /** Writes everything held, in chunks. */
  async #republish(): Promise<void> {
    if (this.#republishing || this.#stopped) return;
    this.#republishing = true;
    this.#dirty = false;
    try {
      const agents = [...this.#held.keys()];
      const p = this.#commands.pipeline();
      this.#writeLiveness(p, Date.now());
      for (let i = 0; i < agents.length; i += 500) {
        const chunk = i === 0 ? p : this.#commands.pipeline();
        for (const agentId of agents.slice(i, i + 500)) this.#writeAgent(chunk, agentId);
        await checked(chunk.exec());
      }
      if (agents.length === 0) await checked(p.exec());
      await this.#republishInfos();
      this.emit("republished", agents.length);
    } catch (err) {
      this.#failed(err as Error);
    } finally {
      this.#republishing = false;
    }
  }

  /**
   * This replica's descriptions, written again from scratch (Redis may have lost them). One
   * pipeline: a describe() made meanwhile goes out after it on the same connection, so it wins.
   */
  async #republishInfos(): Promise<void> {
    const key = this.#infoKey(this.replicaId);
    const entries = [...this.#infos];
    const p = this.#commands.pipeline();
    p.del(key);
    for (let i = 0; i < entries.length; i += 500) p.hset(key, Object.fromEntries(entries.slice(i, i + 500)));
    p.pexpire(key, this.#livenessTtl);
    await checked(p.exec());
  }

  #writeLiveness(p: Pipeline, now: number): void {
    p.set(this.#replicaKey(this.replicaId), this.url, "PX", this.#livenessTtl);
    p.sadd(this.#replicasKey, this.replicaId);
    p.pexpire(this.#infoKey(this.replicaId), this.#livenessTtl);
    this.#livenessDue = now + this.#livenessRefresh;
  }

  #writeAgent(p: Pipeline, agentId: string): void {
    const key = this.#agentKey(agentId);
    p.hset(key, this.replicaId, Date.now() + this.#agentTtl);
    p.pexpire(key, this.#agentTtl);
  }

  #exec(p: Pipeline): void {
    checked(p.exec()).catch((err: Error) => this.#failed(err));
  }

  #failed(err: Error): void {
    this.#dirty = true; // write everything again as soon as Redis answers
    this.emit("error", err);
  }

  #onMessage(channel: string, message: string): void {
    if (channel !== this.#channel) return;
    let m: { agentId?: unknown; replicaId?: unknown; url?: unknown };
    try {
      m = JSON.parse(message);
    } catch {
      return;
    }
    const { agentId, replicaId, url } = m;
    if (typeof agentId !== "string" || typeof replicaId !== "string" || typeof url !== "string") return;
    if (replicaId === this.replicaId) return;
    this.emit("announce", agentId, { replicaId, url });
  }

  #agentKey(agentId: string): string {
    return `${this.#prefix}agent:${agentId}`;
  }

  #replicaKey(replicaId: string): string {
    return `${this.#prefix}replica:${replicaId}`;
  }

  #infoKey(replicaId: string): string {
    return `${this.#prefix}info:${replicaId}`;
  }

  get #replicasKey(): string {
    return `${this.#prefix}replicas`;
  }
}

type Pipeline = ReturnType<Redis["pipeline"]>;

/** A pipeline's first failed command as a rejection (exec itself resolves with per-command errors). */
async function checked(exec: Promise<[Error | null, unknown][] | null>): Promise<void> {
  const results = await exec;
  const failed = results?.find(([err]) => err);
  if (failed) throw failed[0];
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
