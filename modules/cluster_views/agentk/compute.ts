// The views, computed from the informer cache's records: counts and bounded lists (VIEW_LIMITS),
// the same size for ten pods or a hundred thousand.
import { VIEW_LIMITS } from "../limits.ts";
import type {
  NamespacePods,
  NodeProblem,
  NodesView,
  PodProblem,
  PodsView,
  Rollout,
  WarningsView,
  WorkloadsView,
} from "../views.ts";
import type { NodeRecord, PodRecord, WarningRecord, WorkloadRecord } from "./records.ts";

export function nodesView(nodes: Iterable<NodeRecord>): NodesView {
  const view: NodesView = {
    total: 0,
    ready: 0,
    capacity: { cpuMillis: 0, memoryBytes: 0 },
    allocatable: { cpuMillis: 0, memoryBytes: 0 },
  };
  const problems: NodeProblem[] = [];
  for (const n of nodes) {
    view.total++;
    if (n.problems.length > 0)
      problems.push({ name: n.metadata.name, ready: n.ready, conditions: n.problems });
    if (n.ready) view.ready++;
    view.capacity.cpuMillis += n.capacity.cpuMillis;
    view.capacity.memoryBytes += n.capacity.memoryBytes;
    view.allocatable.cpuMillis += n.allocatable.cpuMillis;
    view.allocatable.memoryBytes += n.allocatable.memoryBytes;
  }
  // Not ready first, then by name: the cut keeps the worst.
  problems.sort((a, b) => Number(a.ready) - Number(b.ready) || byName(a.name, b.name));
  return { ...view, problems: problems.slice(0, VIEW_LIMITS.nodeProblems) };
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A pod in trouble: failed, waiting with a reason, or restarting. */
const troubled = (p: PodRecord): boolean =>
  p.phase === "Failed" ||
  p.phase === "Unknown" ||
  p.restarts > 0 ||
  (p.reason !== "" && p.phase !== "Succeeded");

const emptyNamespace = (): NamespacePods => ({
  phases: { Pending: 0, Running: 0, Succeeded: 0, Failed: 0, Unknown: 0 },
  restarts: 0,
});

/**
 * Pods by namespace: the configured namespaces (each shown, even empty), or the busiest ones up
 * to the limit (ties by name, so the cut is stable).
 */
export function podsView(pods: Iterable<PodRecord>, namespaces: readonly string[]): PodsView {
  const by = new Map<string, { pods: number; ns: NamespacePods }>();
  for (const name of namespaces) by.set(name, { pods: 0, ns: emptyNamespace() });
  const problems: PodProblem[] = [];
  for (const p of pods) {
    const name = p.metadata.namespace ?? "";
    if (troubled(p) && (namespaces.length === 0 || by.has(name))) {
      problems.push({
        namespace: name,
        name: p.metadata.name,
        phase: p.phase,
        reason: p.reason,
        restarts: p.restarts,
      });
    }
    let entry = by.get(name);
    if (!entry) {
      if (namespaces.length > 0) continue;
      entry = { pods: 0, ns: emptyNamespace() };
      by.set(name, entry);
    }
    entry.pods++;
    entry.ns.phases[p.phase]++;
    entry.ns.restarts += p.restarts;
  }
  const kept = [...by]
    .sort(([a, x], [b, y]) => y.pods - x.pods || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, VIEW_LIMITS.namespaces)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // Most restarts first, then those with a reason, then by namespace and name (a stable cut).
  problems.sort(
    (a, b) =>
      b.restarts - a.restarts ||
      Number(b.reason !== "") - Number(a.reason !== "") ||
      byName(a.namespace, b.namespace) ||
      byName(a.name, b.name),
  );
  return {
    namespaces: Object.fromEntries(kept.map(([name, e]) => [name, e.ns])),
    problems: problems.slice(0, VIEW_LIMITS.podProblems),
  };
}

const STATE_ORDER: Record<Rollout["state"], number> = { stuck: 0, progressing: 1, complete: 2 };

/** Rollouts not complete first (stuck, then progressing), then the rest, by namespace and name, up to the limit. */
export function workloadsView(workloads: Iterable<WorkloadRecord>): WorkloadsView {
  const all = [...workloads].map((w) => w.rollout);
  all.sort(
    (a, b) =>
      STATE_ORDER[a.state] - STATE_ORDER[b.state] ||
      (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0) ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) ||
      (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0),
  );
  return { rollouts: all.slice(0, VIEW_LIMITS.rollouts), total: all.length };
}

/** The newest Warning events, newest first, up to the limit. */
export function warningsView(events: Iterable<WarningRecord>): WarningsView {
  const latest = [...events].map((e) => e.warning);
  latest.sort(
    (a, b) =>
      (a.lastSeen < b.lastSeen ? 1 : a.lastSeen > b.lastSeen ? -1 : 0) ||
      (a.object < b.object ? -1 : a.object > b.object ? 1 : 0),
  );
  return { latest: latest.slice(0, VIEW_LIMITS.warnings) };
}
