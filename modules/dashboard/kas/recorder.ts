// Writes each agent's history as the views hub tells of it: on every update the changes from the
// views before (changesBetween) and the sample of the update's bucket; every bucket, a sample of
// each agent known (so that a quiet agent's counts stay in the window). Every replica records what
// it hears; the store makes their writes agree.
import type { ClusterViews, ViewEvent, ViewsHub } from "../../cluster_views/index.ts";
import type { Change } from "../api.ts";
import { bucketOf, HISTORY_LIMITS, type HistoryStore } from "./history-store.ts";
import { changesBetween, sampleOf } from "./timeline.ts";

/** How long before following the hub again after it dropped this subscriber. */
const RESUBSCRIBE_MS = 1000;

export interface Recorder {
  close(): void;
}

export function recordHistory(
  hub: ViewsHub,
  store: HistoryStore,
  log: { warn(obj: object, msg: string): void },
  now: () => number = Date.now,
): Recorder {
  const views = new Map<string, ClusterViews>();
  let failing = false;
  const write = (p: Promise<void>) =>
    p.then(
      () => {
        failing = false;
      },
      (err: unknown) => {
        // Once per outage: every update writes.
        if (failing) return;
        failing = true;
        log.warn({ err: (err as Error).message }, "cannot record the dashboard's history");
      },
    );
  const sample = (agentId: string, v: ClusterViews) =>
    write(store.sample(agentId, sampleOf(v, bucketOf(now()))));

  const onEvent = (e: ViewEvent) => {
    if (e.type !== "snapshot" && e.type !== "change") {
      // Whole seconds: replicas hearing the same event mostly write the same change.
      const at = new Date(now() - (now() % 1000)).toISOString();
      const change: Change = {
        agentId: e.agentId,
        at,
        kind: e.type,
        object: `Agent ${e.agentId}`,
        text: e.type === "connected" ? "agent connected" : "agent disconnected",
      };
      void write(store.changes(e.agentId, [change]));
      return;
    }
    const { agentId, at, changed } =
      e.type === "snapshot"
        ? { agentId: e.agent.agentId, at: e.agent.updatedAt, changed: undefined }
        : { agentId: e.agentId, at: e.updatedAt, changed: e.views };
    const before = views.get(agentId);
    // A snapshot holds every view; a change only those that changed.
    const after = e.type === "snapshot" ? e.agent.views : { ...before, ...changed };
    views.set(agentId, after);
    if (before) void write(store.changes(agentId, changesBetween(agentId, before, after, at)));
    void sample(agentId, after);
  };

  let unsubscribe = () => {};
  let retry: NodeJS.Timeout | undefined;
  let closed = false;
  const follow = () => {
    unsubscribe = hub.subscribe({}, onEvent, (reason) => {
      if (closed) return;
      log.warn({ reason }, "the dashboard's history stopped hearing the views hub; following it again");
      retry = setTimeout(follow, RESUBSCRIBE_MS);
      retry.unref();
    });
  };
  follow();
  const tick = setInterval(() => {
    for (const [agentId, v] of views) void sample(agentId, v);
  }, HISTORY_LIMITS.bucketMs);
  tick.unref();
  return {
    close() {
      closed = true;
      clearInterval(tick);
      clearTimeout(retry);
      unsubscribe();
    },
  };
}
