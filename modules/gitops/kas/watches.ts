// Polling manifest projects' refs. One watch per (repository, ref), shared by every stream that
// follows it: each poll is one cheap ref lookup; the files are read by each stream (its own globs)
// only when the commit moved. A push notification polls at once; a failed poll retries sooner,
// backing off; polling stays the fallback.
import type { Logger } from "../../../tool/observability/index.ts";
import {
  type PolledWatch,
  PollWatches,
  type PushedProject,
  type RefSelector,
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

interface Watch extends PolledWatch {
  ref: RefSelector;
  subscribers: Map<Listener, RefSubscription>;
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

export class RefWatches extends PollWatches<Watch> {
  readonly #o: RefWatchesOptions;

  constructor(options: RefWatchesOptions) {
    super(options, "manifest project");
    this.#o = options;
  }

  /**
   * `listener` hears the ref's commit now (if a poll of this watch already found it; else the first
   * poll runs at once) and after every poll that found a different commit or failed, until the
   * returned function is called.
   */
  subscribe(sub: RefSubscription, listener: Listener): () => void {
    const key = `${repositoryKey(sub.location)}\0${refKey(sub.ref)}`;
    const { watch } = this.open(key, (loop) => ({
      key,
      location: sub.location,
      ref: sub.ref,
      subscribers: new Map(),
      loop,
      last: undefined,
    }));
    watch.location = sub.location; // the newest credentials
    watch.subscribers.set(listener, sub);
    if (watch.last?.ok) this.#deliver(listener, watch.last);
    else if (!watch.loop.running) void watch.loop.now(); // the poll under way will tell it
    return () => {
      watch.subscribers.delete(listener);
      if (watch.subscribers.size === 0) this.remove(watch);
    };
  }

  /** A push to `project` polls every watch one of whose streams follows it. */
  protected follows(watch: Watch, project: PushedProject): boolean {
    return [...watch.subscribers.values()].some((s) => followsProject(s, project));
  }

  /** One poll: true when the ref was reached (the loop backs off after false). */
  protected async poll(watch: Watch): Promise<boolean> {
    const first = watch.subscribers.values().next().value;
    if (!first || this.signal.aborted) return true;
    let event: RefEvent;
    try {
      const commit = await this.#o.repositories.resolveRef(watch.location, watch.ref, {
        agentId: first.agentId,
        signal: this.signal,
      });
      event = { ok: true, commit };
    } catch (err) {
      if (this.signal.aborted) return true;
      event = { ok: false, error: err };
    }
    const previous = watch.last;
    watch.last = event;
    if (!event.ok) {
      this.failed(watch, event.error, watch.loop.failures === 0, "cannot poll manifest project");
    } else {
      const changed = !previous?.ok || previous.commit !== event.commit;
      this.reached(changed);
      // Streams compare with what their agent has: an unchanged commit is news to nobody.
      if (!changed) return true;
    }
    for (const listener of [...watch.subscribers.keys()]) this.#deliver(listener, event);
    return event.ok;
  }

  #deliver(listener: Listener, event: RefEvent): void {
    this.deliver(listener, event, "gitops ref listener failed");
  }
}

/** Whether subscription `s` follows `project` by one of the names a push gives it. */
function followsProject(s: RefSubscription, project: PushedProject): boolean {
  return (
    (project.id !== undefined && s.projectNames.includes(project.id)) ||
    (project.fullPath !== undefined && s.projectNames.includes(project.fullPath))
  );
}
