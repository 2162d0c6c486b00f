// A registry of poll watches, for modules that watch Git: one watch per key (a repository, a ref),
// shared by everyone who follows it, each polled by its own PollLoop; created on first use, gone
// with its last follower, polled at once on a push, stopped all together. A module's registry
// extends it with what a poll reads and whom it tells (`poll`, `follows`); the bookkeeping, the
// metrics and the failure reports are here.
import { setMaxListeners } from "node:events";
import type { Logger } from "../../tool/observability/index.ts";
import type { PushedProject } from "./git-push.ts";
import { PollLoop } from "./poll-loop.ts";
import { RepositoryError, type RepositoryLocation } from "./repositories.ts";

/** What every watch holds; a module's watch type adds what it follows. */
export interface PolledWatch {
  readonly key: string;
  /** From the newest follower: a rotated Gitaly token is used from the next poll on. */
  location: RepositoryLocation;
  readonly loop: PollLoop;
}

/** The metrics every registry keeps (a module's own, under its own names). */
export interface PollWatchMetrics {
  /** How many watches there are. */
  watches: { set(value: number): void };
  /** Polls, by result: changed, unchanged, error. */
  polls: { inc(labels: { result: string }): void };
  /** Polls that could not read the repository, by RepositoryError code ("failed" for others). */
  repositoryErrors: { inc(labels: { code: string }): void };
}

/** What a module's registry is given (its own options may hold more). */
export interface PollWatchesOptions {
  pollPeriodMs: number;
  /** For tests: the jitter's source. */
  random?: () => number;
  metrics: PollWatchMetrics;
  log: Logger;
}

export abstract class PollWatches<W extends PolledWatch> {
  readonly #o: PollWatchesOptions;
  /** What the module polls, for the logs ("agent configuration", "manifest project"). */
  readonly #what: string;
  readonly #watches = new Map<string, W>();
  readonly #abort = new AbortController();

  constructor(options: PollWatchesOptions, what: string) {
    this.#o = options;
    this.#what = what;
    // Every repository call under way listens on it.
    setMaxListeners(0, this.#abort.signal);
  }

  /** One poll of `watch`: true when it reached the repository (the loop backs off after false). */
  protected abstract poll(watch: W): Promise<boolean>;

  /** Whether a push to `project` concerns one of the watch's followers. */
  protected abstract follows(watch: W, project: PushedProject): boolean;

  /** Releases what a watch holds beyond its loop, when the registry closes. */
  protected released(_watch: W): void {}

  /** Aborts once the registry is closed: the repository calls of its polls take it. */
  protected get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Watches polled now. */
  get size(): number {
    return this.#watches.size;
  }

  protected watches(): IterableIterator<W> {
    return this.#watches.values();
  }

  /** The watch under `key`; `make` builds it, around the loop that polls it, when there is none. */
  protected open(key: string, make: (loop: PollLoop) => W): { watch: W; fresh: boolean } {
    const found = this.#watches.get(key);
    if (found) return { watch: found, fresh: false };
    const watch: W = make(
      new PollLoop(() => this.poll(watch), {
        periodMs: this.#o.pollPeriodMs,
        ...(this.#o.random && { random: this.#o.random }),
        onError: (err) => this.#o.log.error({ err, repository: key }, `${this.#what} poll failed`),
      }),
    );
    this.#watches.set(key, watch);
    this.#o.metrics.watches.set(this.#watches.size);
    return { watch, fresh: true };
  }

  /** Stops polling `watch` and forgets it (unless it is gone already). */
  protected remove(watch: W): void {
    if (this.#watches.get(watch.key) !== watch) return;
    watch.loop.stop();
    this.#watches.delete(watch.key);
    this.#o.metrics.watches.set(this.#watches.size);
  }

  /** A push to `project`: polls at once every watch one of whose followers follows it. Returns how many. */
  pushed(project: PushedProject): number {
    let n = 0;
    for (const watch of this.#watches.values()) {
      if (this.follows(watch, project)) {
        n++;
        void watch.loop.now();
      }
    }
    return n;
  }

  /** Stops polling; polls under way are abandoned. */
  close(): void {
    this.#abort.abort(new Error("kas is stopping"));
    for (const w of this.#watches.values()) {
      w.loop.stop();
      this.released(w);
    }
    this.#watches.clear();
  }

  /** A poll that reached the repository: counted as changed or unchanged. */
  protected reached(changed: boolean): void {
    this.#o.metrics.polls.inc({ result: changed ? "changed" : "unchanged" });
  }

  /**
   * A poll that could not read the repository: counted, and logged as `message` when `first` (once
   * per outage, not on every retry). Returns the error's text.
   */
  protected failed(watch: W, err: unknown, first: boolean, message: string): string {
    const text = err instanceof Error ? err.message : String(err);
    const code = err instanceof RepositoryError ? err.code : "failed";
    this.#o.metrics.polls.inc({ result: "error" });
    this.#o.metrics.repositoryErrors.inc({ code });
    if (first) this.#o.log.warn({ repository: watch.key, code, err: text }, message);
    return text;
  }

  /** Hands `value` to `listener`; one that throws is logged as `message`, the others still hear. */
  protected deliver<T>(listener: (value: T) => void, value: T, message: string, context: object = {}): void {
    try {
      listener(value);
    } catch (err) {
      this.#o.log.error({ err, ...context }, message);
    }
  }
}
