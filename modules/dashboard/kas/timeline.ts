// What changed between two consecutive views of an agent, in words a person reads (a Deployment
// scaled, a rollout started, stuck or done, a node NotReady, a pod crash-looping, a warning), and
// an agent's counts at one time (the history's point). Pure: tested apart from kas.
import type { ClusterViews, PodPhase, Rollout } from "../../cluster_views/views.ts";
import type { Change, Sample } from "../api.ts";

/** A change's object and text are cut to these (the history's memory bound rests on them). */
export const MAX_OBJECT = 320;
export const MAX_TEXT = 512;
const cut = (s: string, max: number) => (s.length <= max ? s : `${s.slice(0, max - 1)}…`);

const PHASES: readonly PodPhase[] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];

export function sampleOf(views: ClusterViews, t: number): Sample {
  const pods = { Pending: 0, Running: 0, Succeeded: 0, Failed: 0, Unknown: 0 };
  let restarts = 0;
  for (const ns of Object.values(views.pods?.namespaces ?? {})) {
    for (const phase of PHASES) pods[phase] += ns.phases[phase];
    restarts += ns.restarts;
  }
  return {
    t,
    nodesReady: views.nodes?.ready ?? 0,
    nodesTotal: views.nodes?.total ?? 0,
    pods,
    restarts,
    warnings: views.warnings?.latest.length ?? 0,
    rollouts: (views.workloads?.rollouts ?? []).filter((r) => r.state !== "complete").length,
  };
}

const rolloutKey = (r: Rollout) => `${r.kind} ${r.namespace}/${r.name}`;
const why = (r: Rollout) => (r.reason ? `: ${r.reason}${r.message ? ` (${r.message})` : ""}` : "");

/**
 * The changes from `before` to `after` (the agent's views before and after one update, applied at
 * `at`), oldest first. A view absent from either side tells nothing (turned off, or not known yet).
 */
export function changesBetween(
  agentId: string,
  before: ClusterViews,
  after: ClusterViews,
  at: string,
): Change[] {
  const changes: Change[] = [];
  const add = (kind: Change["kind"], object: string, text: string, when = at) =>
    changes.push({ agentId, at: when, kind, object: cut(object, MAX_OBJECT), text: cut(text, MAX_TEXT) });

  if (before.workloads && after.workloads) {
    const old = new Map(before.workloads.rollouts.map((r) => [rolloutKey(r), r]));
    for (const r of after.workloads.rollouts) {
      const key = rolloutKey(r);
      const was = old.get(key);
      if (was && was.desired !== r.desired)
        add("scaled", key, `scaled from ${was.desired} to ${r.desired} replicas`);
      const wasState = was?.state ?? "complete";
      if (r.state === wasState) continue;
      if (r.state === "stuck")
        add("rollout-stuck", key, `rollout stuck at ${r.updated}/${r.desired} updated${why(r)}`);
      else if (r.state === "progressing")
        add(
          "rollout-started",
          key,
          `rolling out: ${r.updated}/${r.desired} updated, ${r.ready} ready${why(r)}`,
        );
      else add("rolled-out", key, `rolled out: ${r.desired}/${r.desired} ready`);
    }
  }

  if (before.nodes && after.nodes) {
    const notReady = (v: ClusterViews) =>
      new Map((v.nodes?.problems ?? []).filter((n) => !n.ready).map((n) => [n.name, n]));
    const was = notReady(before);
    const now = notReady(after);
    for (const [name, n] of now) {
      if (was.has(name)) continue;
      const ready = n.conditions.find((c) => c.type === "Ready");
      const detail = ready ? `: ${[ready.reason, ready.message].filter(Boolean).join(", ")}` : "";
      add("node-not-ready", `Node ${name}`, `node not ready${detail}`);
    }
    for (const name of was.keys()) if (!now.has(name)) add("node-ready", `Node ${name}`, "node ready again");
    // Agents older than the node list: the counts only.
    if (!after.nodes.problems && before.nodes.ready !== after.nodes.ready) {
      const kind = after.nodes.ready < before.nodes.ready ? "node-not-ready" : "node-ready";
      add(kind, "Nodes", `nodes ready: ${before.nodes.ready} → ${after.nodes.ready} of ${after.nodes.total}`);
    }
  }

  if (before.pods && after.pods) {
    const reasons = new Map(
      (before.pods.problems ?? []).map((p) => [`${p.namespace}/${p.name}`, p.reason] as const),
    );
    for (const p of after.pods.problems ?? []) {
      if (p.reason === "" || reasons.get(`${p.namespace}/${p.name}`) === p.reason) continue;
      add(
        "pod-trouble",
        `Pod ${p.namespace}/${p.name}`,
        `${p.reason}, ${p.restarts} restart${p.restarts === 1 ? "" : "s"}`,
      );
    }
  }

  if (before.warnings && after.warnings) {
    const seen = new Map(
      before.warnings.latest.map((w) => [`${w.namespace}/${w.object}/${w.reason}`, w] as const),
    );
    for (const w of after.warnings.latest) {
      const was = seen.get(`${w.namespace}/${w.object}/${w.reason}`);
      if (was && was.lastSeen === w.lastSeen && was.count === w.count) continue;
      const [kind, name] = w.object.split("/", 2);
      add(
        "warning",
        `${kind} ${w.namespace}/${name}`,
        `${w.reason}: ${w.message}${w.count > 1 ? ` (×${w.count})` : ""}`,
        w.lastSeen,
      );
    }
  }
  return changes;
}
