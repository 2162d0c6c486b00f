// Usage counts as GitLab's kas reports them to GitLab (`usage_metrics`): modules register named
// counters (how many times) and unique counters (which users, agents, projects) while they are
// built, and count as they work. The usage_metrics module takes what accumulated each period and,
// once GitLab accepted it, subtracts exactly that: what was counted meanwhile stays for the next
// report. In memory, per replica; GitLab adds up the replicas' reports.

/** How many times something happened (GitLab's kas's usage_metrics.Counter). */
export interface UsageCounter {
  inc(by?: number): void;
}

/** Which ids took part (GitLab's kas's usage_metrics.UniqueCounter): GitLab counts them once each. */
export interface UniqueUsageCounter {
  /** A GitLab id (a decimal int64); anything else is ignored. */
  add(id: string): void;
}

/** Where modules register their usage counts (`KasModuleDeps.usage`). */
export interface UsageRegistry {
  /** Throws if `name` is taken: one owner per name, as GitLab's kas. */
  counter(name: string): UsageCounter;
  uniqueCounter(name: string): UniqueUsageCounter;
}

/** What accumulated: only non-zero counters and non-empty unique counters (ids as decimal strings). */
export interface UsageData {
  counters: Record<string, number>;
  uniqueCounters: Record<string, string[]>;
}

export interface UsageTrackerOptions {
  /**
   * Ids a unique counter holds at most while GitLab cannot be reached; further new ids are dropped
   * (`onDropped`). Default 10 000.
   */
  maxUniqueIds?: number;
  /** A new id of unique counter `name` was dropped because it was full. */
  onDropped?: (name: string) => void;
}

const GITLAB_ID = /^[1-9]\d{0,18}$/;
const MAX_ID = 2n ** 63n - 1n;

/** Every registered count of one kas process. */
export class UsageTracker implements UsageRegistry {
  readonly #counters = new Map<string, { n: number }>();
  readonly #unique = new Map<string, Set<string>>();
  readonly #maxIds: number;
  readonly #onDropped: (name: string) => void;

  constructor(options: UsageTrackerOptions = {}) {
    this.#maxIds = options.maxUniqueIds ?? 10_000;
    this.#onDropped = options.onDropped ?? (() => {});
  }

  counter(name: string): UsageCounter {
    this.#claim(name);
    const c = { n: 0 };
    this.#counters.set(name, c);
    return {
      inc(by = 1) {
        if (Number.isSafeInteger(by) && by > 0) c.n += by;
      },
    };
  }

  uniqueCounter(name: string): UniqueUsageCounter {
    this.#claim(name);
    const ids = new Set<string>();
    this.#unique.set(name, ids);
    return {
      add: (id) => {
        if (ids.has(id) || !isGitLabId(id)) return;
        if (ids.size >= this.#maxIds) return this.#onDropped(name);
        ids.add(id);
      },
    };
  }

  /** What accumulated since the last subtraction; undefined when there is nothing to report. */
  collect(): UsageData | undefined {
    const data: UsageData = { counters: {}, uniqueCounters: {} };
    let any = false;
    for (const [name, c] of this.#counters) {
      if (c.n === 0) continue;
      data.counters[name] = c.n;
      any = true;
    }
    for (const [name, ids] of this.#unique) {
      if (ids.size === 0) continue;
      data.uniqueCounters[name] = [...ids];
      any = true;
    }
    return any ? data : undefined;
  }

  /** GitLab took `data` (from `collect`): only what it took is taken away. */
  subtract(data: UsageData): void {
    for (const [name, n] of Object.entries(data.counters)) {
      const c = this.#counters.get(name);
      if (c) c.n = Math.max(0, c.n - n);
    }
    for (const [name, sent] of Object.entries(data.uniqueCounters)) {
      const ids = this.#unique.get(name);
      for (const id of sent) ids?.delete(id);
    }
  }

  #claim(name: string): void {
    if (this.#counters.has(name) || this.#unique.has(name))
      throw new Error(`usage counter ${JSON.stringify(name)} is registered already`);
  }
}

/** A GitLab id: 1 .. 2^63-1 in decimal, as it is written into GitLab's JSON unchanged. */
export function isGitLabId(id: string): boolean {
  return GITLAB_ID.test(id) && BigInt(id) <= MAX_ID;
}
