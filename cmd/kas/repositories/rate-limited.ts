// kas rate-limits itself toward Gitaly: every repository call first takes a token from each limit
// that applies (per agent and cluster-wide through Redis, shared by all replicas; per Gitaly server
// and process-wide in this process). A call over a limit waits its turn (FIFO), never fails for it;
// waits are counted per scope. When Redis is down the Redis limits are skipped, the process limits
// still hold, and the outage is logged and counted once.
import type { Redis } from "ioredis";
import { Counter, type Registry } from "prom-client";
import {
  type RefSelector,
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
  type TreeFile,
} from "../../../modules/runtime/repositories.ts";
import { FifoLimiter } from "./fifo-limiter.ts";
import {
  createLimiter,
  DEFAULT_GITALY_RATE_LIMITS,
  type LimiterStore,
  type RateLimitSpec,
} from "./rate-limits.ts";

export type RateLimitScope = "process_global" | "process_server" | "agent" | "cluster_global";

export interface RateLimitedRepositoriesOptions {
  /** This process, all servers. Default 30/s, burst 70 (GitLab kas's `gitaly.global_api_rate_limit`). */
  processGlobal?: RateLimitSpec;
  /** This process, per Gitaly server (`local` for the local backend). Default 15/s, burst 40 (`per_server_api_rate_limit`). */
  perServer?: RateLimitSpec;
  /** All replicas, per agent (Redis). Default 1/s, burst 10. */
  perAgent?: RateLimitSpec;
  /** All replicas together (Redis). Default 100/s, burst 200. */
  clusterGlobal?: RateLimitSpec;
  /**
   * Shared by the replicas; without it only the process limits apply. Not closed by this class.
   * While the client is not `ready` (still connecting, reconnecting) its limits are skipped.
   */
  redis?: Redis;
  /** Prefix of the Redis keys. Default "kas:gitaly_rate_limit". */
  keyPrefix?: string;
  /** Where `kas_gitaly_rate_limited_total` and `kas_gitaly_rate_limit_redis_outages_total` go. */
  registry: Registry;
  /** A Redis limiter call slower than this counts as Redis failing. Default 1000 ms. */
  redisTimeoutMs?: number;
  /** After a Redis failure, Redis limits are skipped for this long before Redis is tried again. Default 1000 ms. */
  redisRetryMs?: number;
  /** For the outage start/end lines. */
  log?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

interface Limit {
  readonly scope: RateLimitScope;
  readonly limiter: FifoLimiter;
  readonly key: (location: RepositoryLocation, ctx: RepositoryCallContext) => string;
  readonly inRedis: boolean;
}

/** The Gitaly server a location is on: its address, or "local". */
export function serverKey(location: RepositoryLocation): string {
  return location.backend === "gitaly" ? location.gitaly.address : "local";
}

function counter<T extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: T[],
): Counter<T> {
  // Several decorators may share a registry (one per backend): one metric between them.
  return (
    (registry.getSingleMetric(name) as Counter<T> | undefined) ??
    new Counter({ name, help, labelNames, registers: [registry] })
  );
}

export class RateLimitedRepositories implements RepositoryReader {
  readonly #inner: RepositoryReader;
  readonly #limits: Limit[];
  readonly #rateLimited: Counter<"scope">;
  readonly #outages: Counter;
  readonly #redisRetryMs: number;
  readonly #log: RateLimitedRepositoriesOptions["log"];
  /** Set while Redis is failing: Redis limits are skipped until this time. */
  #redisDownUntil: number | undefined;

  constructor(inner: RepositoryReader, opts: RateLimitedRepositoriesOptions) {
    this.#inner = inner;
    this.#redisRetryMs = opts.redisRetryMs ?? 1000;
    this.#log = opts.log;
    const prefix = opts.keyPrefix ?? "kas:gitaly_rate_limit";
    const d = DEFAULT_GITALY_RATE_LIMITS;
    const memory = { memory: true } as const;
    const redis = opts.redis && { redis: opts.redis, timeoutMs: opts.redisTimeoutMs ?? 1000 };
    const fifo = (spec: RateLimitSpec, store: LimiterStore, name: string) =>
      new FifoLimiter(createLimiter(spec, store, `${prefix}:${name}`));
    // Narrowest first: a call held up by a wide limit has then only spent tokens of its own agent.
    this.#limits = [
      ...(redis
        ? [
            {
              scope: "agent" as const,
              limiter: fifo(opts.perAgent ?? d.perAgent, redis, "agent"),
              key: (_: RepositoryLocation, ctx: RepositoryCallContext) => ctx.agentId,
              inRedis: true,
            },
          ]
        : []),
      {
        scope: "process_server",
        limiter: fifo(opts.perServer ?? d.perServer, memory, "server"),
        key: serverKey,
        inRedis: false,
      },
      {
        scope: "process_global",
        limiter: fifo(opts.processGlobal ?? d.processGlobal, memory, "process"),
        key: () => "global",
        inRedis: false,
      },
      ...(redis
        ? [
            {
              scope: "cluster_global" as const,
              limiter: fifo(opts.clusterGlobal ?? d.clusterGlobal, redis, "cluster"),
              key: () => "global",
              inRedis: true,
            },
          ]
        : []),
    ];
    this.#rateLimited = counter(
      opts.registry,
      "kas_gitaly_rate_limited_total",
      "Gitaly calls kas deferred because one of its own rate limits was reached, by limit scope.",
      ["scope"],
    );
    this.#outages = counter(
      opts.registry,
      "kas_gitaly_rate_limit_redis_outages_total",
      "Times Redis failed while kas was rate-limiting Gitaly calls (its Redis limits were skipped until it answered again).",
      [],
    );
  }

  async resolveRef(location: RepositoryLocation, ref: RefSelector, ctx: RepositoryCallContext) {
    await this.#admit(location, ctx);
    return this.#inner.resolveRef(location, ref, ctx);
  }

  async readFile(
    location: RepositoryLocation,
    commitId: string,
    path: string,
    maxBytes: number,
    ctx: RepositoryCallContext,
  ): Promise<Buffer | undefined> {
    await this.#admit(location, ctx);
    return this.#inner.readFile(location, commitId, path, maxBytes, ctx);
  }

  /** One call, one token from each limit, however many files it reads. */
  async readFiles(
    location: RepositoryLocation,
    commitId: string,
    paths: readonly string[],
    maxBytesEach: number,
    ctx: RepositoryCallContext,
    maxTotalBytes?: number,
  ): Promise<Map<string, Buffer>> {
    await this.#admit(location, ctx);
    return this.#inner.readFiles(location, commitId, paths, maxBytesEach, ctx, maxTotalBytes);
  }

  async listFiles(
    location: RepositoryLocation,
    commitId: string,
    dir: string,
    ctx: RepositoryCallContext,
  ): Promise<TreeFile[]> {
    await this.#admit(location, ctx);
    return this.#inner.listFiles(location, commitId, dir, ctx);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  /** Takes a token from every limit, waiting as long as needed (or until the signal aborts). */
  async #admit(location: RepositoryLocation, ctx: RepositoryCallContext): Promise<void> {
    for (const limit of this.#limits) {
      if (limit.inRedis && this.#redisDownUntil !== undefined && Date.now() < this.#redisDownUntil) continue;
      try {
        // Counted when the call starts waiting, so the metric shows deferrals as they happen.
        await limit.limiter.take(limit.key(location, ctx), ctx.signal, () =>
          this.#rateLimited.inc({ scope: limit.scope }),
        );
      } catch (err) {
        if (ctx.signal?.aborted) {
          throw new RepositoryError(
            "aborted",
            `call abandoned while waiting for the ${limit.scope} rate limit`,
            {
              cause: err,
            },
          );
        }
        if (!limit.inRedis) throw err;
        this.#redisFailed(err);
        continue;
      }
      if (limit.inRedis) this.#redisAnswered();
    }
  }

  #redisFailed(err: unknown): void {
    if (this.#redisDownUntil === undefined) {
      this.#outages.inc();
      this.#log?.warn(
        { err: (err as Error)?.message ?? String(err) },
        "Redis failed: Gitaly rate limits across replicas are skipped until it answers again",
      );
    }
    this.#redisDownUntil = Date.now() + this.#redisRetryMs;
  }

  #redisAnswered(): void {
    if (this.#redisDownUntil === undefined) return;
    this.#redisDownUntil = undefined;
    this.#log?.info({}, "Redis answers again: Gitaly rate limits across replicas apply again");
  }
}
