// Content at a full commit id never changes, so kas reads it once: files and listings read at a
// commit are kept (least recently used out, bounded by bytes) and identical concurrent reads share
// one backend call. A reconnecting herd of agents that read the same configuration and manifests
// at the same commits then costs Gitaly one call per distinct read instead of one per agent. It
// sits above the rate limiter: a hit takes no token. Refs are never cached (they move).
import { Counter, Gauge, type Registry } from "prom-client";
import {
  type RefSelector,
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
  repositoryKey,
  type TreeFile,
} from "../../../modules/runtime/repositories.ts";

export interface CachedRepositoriesOptions {
  /** Bytes of content (and listings) kept at most. Default 64 MiB. */
  maxBytes?: number;
  /** Where `kas_repository_read_cache_total` and `kas_repository_read_cache_bytes` go. */
  registry: Registry;
}

/** Bookkeeping charged per entry on top of its content, so many tiny entries are bounded too. */
const ENTRY_OVERHEAD_BYTES = 128;
const FULL_COMMIT_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

type Result = "hit" | "miss" | "shared";

interface Flight<T> {
  readonly promise: Promise<T>;
  readonly controller: AbortController;
  /** Callers still waiting: when the last one leaves, the backend call is abandoned. */
  waiters: number;
}

export class CachedRepositories implements RepositoryReader {
  readonly #inner: RepositoryReader;
  readonly #maxBytes: number;
  /** Insertion order is recency order: a hit is moved to the end. */
  readonly #entries = new Map<string, { value: unknown; bytes: number }>();
  readonly #inFlight = new Map<string, Flight<unknown>>();
  #bytes = 0;
  readonly #lookups: Counter<"method" | "result">;
  readonly #bytesGauge: Gauge;

  constructor(inner: RepositoryReader, options: CachedRepositoriesOptions) {
    this.#inner = inner;
    this.#maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    if (!(this.#maxBytes >= 0)) throw new RangeError("maxBytes must be >= 0");
    const { registry } = options;
    this.#lookups =
      (registry.getSingleMetric("kas_repository_read_cache_total") as Counter<"method" | "result">) ??
      new Counter({
        name: "kas_repository_read_cache_total",
        help: "Repository reads at a full commit id: hit (kept), shared (joined a read in flight), miss (read from the backend).",
        labelNames: ["method", "result"],
        registers: [registry],
      });
    this.#bytesGauge =
      (registry.getSingleMetric("kas_repository_read_cache_bytes") as Gauge) ??
      new Gauge({
        name: "kas_repository_read_cache_bytes",
        help: "Bytes the repository read cache holds.",
        registers: [registry],
      });
  }

  /** Bytes held now (content, listings and per-entry overhead). */
  get bytes(): number {
    return this.#bytes;
  }

  resolveRef(location: RepositoryLocation, ref: RefSelector, ctx: RepositoryCallContext) {
    return this.#inner.resolveRef(location, ref, ctx);
  }

  readFile(
    location: RepositoryLocation,
    commitId: string,
    path: string,
    maxBytes: number,
    ctx: RepositoryCallContext,
  ): Promise<Buffer | undefined> {
    return this.#read(
      "readFile",
      location,
      commitId,
      [path, maxBytes],
      ctx,
      (c) => this.#inner.readFile(location, commitId, path, maxBytes, c),
      (v) => v?.length ?? 0,
      (v) => v,
    );
  }

  readFiles(
    location: RepositoryLocation,
    commitId: string,
    paths: readonly string[],
    maxBytesEach: number,
    ctx: RepositoryCallContext,
    maxTotalBytes?: number,
  ): Promise<Map<string, Buffer>> {
    return this.#read(
      "readFiles",
      location,
      commitId,
      [[...new Set(paths)].sort(), maxBytesEach, maxTotalBytes ?? null],
      ctx,
      (c) => this.#inner.readFiles(location, commitId, paths, maxBytesEach, c, maxTotalBytes),
      (v) => [...v].reduce((n, [p, b]) => n + p.length + b.length, 0),
      // Each caller gets its own map (the buffers are shared: callers only read them).
      (v) => new Map(v),
    );
  }

  listFiles(
    location: RepositoryLocation,
    commitId: string,
    dir: string,
    ctx: RepositoryCallContext,
  ): Promise<TreeFile[]> {
    return this.#read(
      "listFiles",
      location,
      commitId,
      [dir],
      ctx,
      (c) => this.#inner.listFiles(location, commitId, dir, c),
      (v) => v.reduce((n, f) => n + f.path.length + f.oid.length + 32, 0),
      (v) => [...v],
    );
  }

  close(): Promise<void> {
    this.#entries.clear();
    this.#bytes = 0;
    this.#bytesGauge.set(0);
    return this.#inner.close();
  }

  async #read<T>(
    method: string,
    location: RepositoryLocation,
    commitId: string,
    args: unknown[],
    ctx: RepositoryCallContext,
    load: (ctx: RepositoryCallContext) => Promise<T>,
    size: (value: T) => number,
    copy: (value: T) => T,
  ): Promise<T> {
    // A branch name or abbreviated id could point elsewhere later: only full ids are immutable.
    if (!FULL_COMMIT_ID.test(commitId)) return load(ctx);
    const key = JSON.stringify([method, repositoryKey(location), commitId, ...args]);
    const entry = this.#entries.get(key);
    if (entry !== undefined) {
      this.#entries.delete(key);
      this.#entries.set(key, entry);
      this.#lookups.inc({ method, result: "hit" });
      return copy(entry.value as T);
    }
    let flight = this.#inFlight.get(key) as Flight<T> | undefined;
    const result: Result = flight === undefined ? "miss" : "shared";
    this.#lookups.inc({ method, result });
    if (flight === undefined) flight = this.#start(key, ctx, load, size);
    return copy(await this.#wait(key, flight, ctx.signal));
  }

  #start<T>(
    key: string,
    ctx: RepositoryCallContext,
    load: (ctx: RepositoryCallContext) => Promise<T>,
    size: (value: T) => number,
  ): Flight<T> {
    // The shared call is made for the first caller's agent (its rate limit), but under a signal
    // of its own: it is abandoned only once every caller waiting on it has gone.
    const controller = new AbortController();
    const promise = load({ agentId: ctx.agentId, signal: controller.signal }).then((value) => {
      if (this.#inFlight.get(key) === flight) this.#store(key, value, size(value) + key.length);
      return value;
    });
    const flight: Flight<T> = { promise, controller, waiters: 0 };
    this.#inFlight.set(key, flight as Flight<unknown>);
    // Errors are never kept: the next caller asks the backend again.
    const done = () => {
      if (this.#inFlight.get(key) === flight) this.#inFlight.delete(key);
    };
    promise.then(done, done);
    return flight;
  }

  /** The flight's value, or this caller's abort reason once its signal aborts (the flight goes on for others). */
  #wait<T>(key: string, flight: Flight<T>, signal: AbortSignal | undefined): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    flight.waiters++;
    if (signal === undefined) return flight.promise;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        flight.waiters--;
        if (flight.waiters === 0) {
          // Nobody waits any more: a later caller starts afresh rather than join an abandoned call.
          if (this.#inFlight.get(key) === flight) this.#inFlight.delete(key);
          flight.controller.abort(signal.reason);
        }
        reject(abortError(signal));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      flight.promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  #store(key: string, value: unknown, bytes: number): void {
    const charged = bytes + ENTRY_OVERHEAD_BYTES;
    if (charged > this.#maxBytes) return;
    const old = this.#entries.get(key);
    if (old !== undefined) {
      this.#entries.delete(key);
      this.#bytes -= old.bytes;
    }
    this.#entries.set(key, { value, bytes: charged });
    this.#bytes += charged;
    for (const [oldest, e] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= e.bytes;
    }
    this.#bytesGauge.set(this.#bytes);
  }
}

function abortError(signal: AbortSignal): RepositoryError {
  return new RepositoryError("aborted", "repository read abandoned", { cause: signal.reason });
}
