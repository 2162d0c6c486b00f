// Polling manifest projects' refs. One watch per (repository, ref), shared by every stream that
// follows it: each poll is one cheap ref lookup; the files are read by each stream (its own globs)
// only when the commit moved. A push notification polls at once; a failed poll retries sooner,
// backing off; polling stays the fallback.
import { setMaxListeners } from "node:events";
import type { Logger } from "../../../tool/observability/index.ts";
import {
  PollLoop,
  type PushedProject,
  type RefSelector,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
  repositoryKey,
} from "../../runtime/index.ts";
import type { GitopsMetrics } from "./metrics.ts";

/** What a poll found: the commit the ref points at (undefined: no such ref), or why it failed. */
export type RefEvent = { ok: true; commit: string | undefined } | { ok: false; error: unknown };

export interface RefSubscription {
  location: RepositoryLocation;
  ref: RefSelector;
  /** Rate limits are per agent: the lookup is charged to one of the watch's agents. */
  agentId: string;
  /** Names a push notification may use for the project: its numeric id, its full path(s). */
  projectNames: readonly string[];
}

type Listener = (event: RefEvent) => void;

interface Watch {
  key: string;
  location: RepositoryLocation;
  ref: RefSelector;
  subscribers: Map<Listener, RefSubscription>;
  loop: PollLoop;
  /** The last poll's result; undefined before the first. */
  last: RefEvent | undefined;
}

export interface RefWatchesOptions {
  repositories: RepositoryReader;
  pollPeriodMs: number;
  metrics: GitopsMetrics;
  log: Logger;
  random?: () => number;
}

export function refKey(ref: RefSelector): string {
  if ("branch" in ref) return `branch:${ref.branch}`;
  if ("tag" in ref) return `tag:${ref.tag}`;
  if ("commit" in ref) return `commit:${ref.commit}`;
  return "default";
}

export class RefWatches {
  readonly #o: RefWatchesOptions;
  readonly #watches = new Map<string, Watch>();
  readonly #abort = new AbortController();

  constructor(options: RefWatchesOptions) {
    this.#o = options;
    setMaxListeners(0, this.#abort.signal);
  }

  get size(): number {
    return this.#watches.size;
  }

  /**
   * `listener` hears the ref's commit now (if a poll of this watch already found it; else the first
   * poll runs at once) and after every poll that found a different commit or failed, until the
   * returned function is called.
   */
  subscribe(sub: RefSubscription, listener: Listener): () => void {
    const key = `${repositoryKey(sub.location)}\0${refKey(sub.ref)}`;
    let watch = this.#watches.get(key);
    if (!watch) {
      const w: Watch = {
        key,
        location: sub.location,
        ref: sub.ref,
        subscribers: new Map(),
        loop: new PollLoop(() => this.#pollOnce(w), {
          periodMs: this.#o.pollPeriodMs,
          ...(this.#o.random && { random: this.#o.random }),
          onError: (err) => this.#o.log.error({ err, repository: key }, "manifest project poll failed"),
        }),
        last: undefined,
      };
      watch = w;
      this.#watches.set(key, watch);
      this.#o.metrics.watches.set(this.#watches.size);
    }
    watch.location = sub.location; // the newest credentials
    watch.subscribers.set(listener, sub);
    if (watch.last?.ok) this.#deliver(listener, watch.last);
    else if (!watch.loop.running) void watch.loop.now(); // the poll under way will tell it
    const w = watch;
    return () => {
      w.subscribers.delete(listener);
      if (w.subscribers.size > 0 || this.#watches.get(w.key) !== w) return;
      w.loop.stop();
      this.#watches.delete(w.key);
      this.#o.metrics.watches.set(this.#watches.size);
    };
  }

  /** A push to `project`: polls at once every watch one of whose streams follows it. Returns how many. */
  pushed(project: PushedProject): number {
    let n = 0;
    for (const watch of this.#watches.values()) {
      const matches = [...watch.subscribers.values()].some(
        (s) =>
          (project.id !== undefined && s.projectNames.includes(project.id)) ||
          (project.fullPath !== undefined && s.projectNames.includes(project.fullPath)),
      );
      if (matches) {
        n++;
        void watch.loop.now();
      }
    }
    return n;
  }

  close(): void {
    this.#abort.abort(new Error("kas is stopping"));
    for (const w of this.#watches.values()) w.loop.stop();
    this.#watches.clear();
  }

  /** One poll: true when the ref was reached (the loop backs off after false). */
  async #pollOnce(watch: Watch): Promise<boolean> {
    const first = watch.subscribers.values().next().value;
    if (!first || this.#abort.signal.aborted) return true;
    let event: RefEvent;
    try {
      const commit = await this.#o.repositories.resolveRef(watch.location, watch.ref, {
        agentId: first.agentId,
        signal: this.#abort.signal,
      });
      event = { ok: true, commit };
    } catch (err) {
      if (this.#abort.signal.aborted) return true;
      event = { ok: false, error: err };
    }
    const previous = watch.last;
    watch.last = event;
    if (!event.ok) {
      const code = event.error instanceof RepositoryError ? event.error.code : "failed";
      this.#o.metrics.polls.inc({ result: "error" });
      this.#o.metrics.repositoryErrors.inc({ code });
      if (watch.loop.failures === 0) {
        this.#o.log.warn(
          { repository: watch.key, code, err: (event.error as Error)?.message },
          "cannot poll manifest project",
        );
      }
    } else {
      const changed = !previous?.ok || previous.commit !== event.commit;
      this.#o.metrics.polls.inc({ result: changed ? "changed" : "unchanged" });
      // Streams compare with what their agent has: an unchanged commit is news to nobody.
      if (!changed) return true;
    }
    for (const listener of [...watch.subscribers.keys()]) this.#deliver(listener, event);
    return event.ok;
  }

  #deliver(listener: Listener, event: RefEvent): void {
    try {
      listener(event);
    } catch (err) {
      this.#o.log.error({ err }, "gitops ref listener failed");
    }
  }
}
