// What the informer cache keeps of each object: its name, namespace and resourceVersion (what
// client-node's cache needs) and the few fields the views read, never the whole object. A pod is
// kept as ~150 bytes instead of its 5-20 KiB of JSON.
// Not re-exported by the package index: its own module.
import { quantityToScalar } from "@kubernetes/client-node/dist/util.js";
import { VIEW_LIMITS } from "../limits.ts";
import type { NodeCondition, PodPhase, Resources, Rollout, RolloutState, Warning } from "../views.ts";

interface Meta {
  metadata: { name: string; namespace?: string; resourceVersion?: string };
}

/** `problems`: the node's conditions that are not as on a healthy node (empty when it is healthy). */
export type NodeRecord = Meta & {
  ready: boolean;
  capacity: Resources;
  allocatable: Resources;
  problems: NodeCondition[];
};
/** `reason`: a container's waiting or last termination reason ("" when none), what `kubectl get pods` shows. */
export type PodRecord = Meta & { phase: PodPhase; restarts: number; reason: string };
export type WorkloadRecord = Meta & { rollout: Rollout };
export type WarningRecord = Meta & { warning: Warning };

// Objects as the API sends them (JSON), or as client-node's list deserializes them (Dates).
// biome-ignore lint/suspicious/noExplicitAny: raw Kubernetes objects, read defensively
type Raw = any;

const PHASES: readonly PodPhase[] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];

function meta(o: Raw): Meta["metadata"] {
  const m = o?.metadata ?? {};
  return {
    name: String(m.name ?? ""),
    ...(m.namespace && { namespace: String(m.namespace) }),
    ...(m.resourceVersion && { resourceVersion: String(m.resourceVersion) }),
  };
}

const int = (x: unknown): number => (typeof x === "number" && Number.isSafeInteger(x) && x >= 0 ? x : 0);

/** A quantity ("3500m", "16Gi") scaled (1000 for CPU in millicores, 1 for bytes); 0 if unreadable. */
function quantity(q: unknown, scale: number): number {
  if (typeof q !== "string" && typeof q !== "number") return 0;
  try {
    const v = quantityToScalar(String(q));
    const n = typeof v === "bigint" ? Number(v) * scale : Math.round(v * scale);
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  } catch {
    return 0;
  }
}

const resources = (r: Raw): Resources => ({
  cpuMillis: quantity(r?.cpu, 1000),
  memoryBytes: quantity(r?.memory, 1),
});

const cut = (s: unknown, max: number): string => {
  const text = String(s ?? "");
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
};

const time = (t: unknown): string | undefined => {
  if (t instanceof Date) return Number.isNaN(t.getTime()) ? undefined : t.toISOString();
  if (typeof t !== "string" || t === "") return undefined;
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
};

/** A condition as a healthy node has it: Ready True, every other (the pressures, NetworkUnavailable) False. */
const healthy = (c: Raw): boolean => (c?.type === "Ready" ? c?.status === "True" : c?.status === "False");

export function nodeRecord(o: Raw): NodeRecord {
  const conditions: Raw[] = Array.isArray(o?.status?.conditions) ? o.status.conditions : [];
  const ready = conditions.some((c) => c?.type === "Ready" && c?.status === "True");
  const problems = conditions
    .filter((c) => !healthy(c))
    .slice(0, VIEW_LIMITS.conditions)
    .map((c) => ({
      type: cut(c?.type, VIEW_LIMITS.name),
      status: cut(c?.status, VIEW_LIMITS.name),
      reason: cut(c?.reason, VIEW_LIMITS.name),
      message: cut(c?.message, VIEW_LIMITS.message),
    }));
  // A node without a Ready condition at all is not ready either: say so.
  if (!ready && !conditions.some((c) => c?.type === "Ready"))
    problems.unshift({ type: "Ready", status: "Unknown", reason: "NoReadyCondition", message: "" });
  return {
    metadata: meta(o),
    ready,
    capacity: resources(o?.status?.capacity),
    allocatable: resources(o?.status?.allocatable),
    problems: problems.slice(0, VIEW_LIMITS.conditions),
  };
}

export function podRecord(o: Raw): PodRecord {
  const phase = PHASES.includes(o?.status?.phase) ? (o.status.phase as PodPhase) : "Pending";
  let restarts = 0;
  let reason = "";
  for (const list of [o?.status?.initContainerStatuses, o?.status?.containerStatuses]) {
    if (!Array.isArray(list)) continue;
    for (const c of list) {
      restarts += int(c?.restartCount);
      // As `kubectl get pods`: a container waiting (CrashLoopBackOff, ImagePullBackOff) says most.
      const why = c?.state?.waiting?.reason ?? c?.state?.terminated?.reason;
      if (reason === "" && typeof why === "string" && why !== "" && why !== "Completed") reason = why;
    }
  }
  if (reason === "" && typeof o?.status?.reason === "string") reason = o.status.reason;
  return { metadata: meta(o), phase, restarts, reason: cut(reason, VIEW_LIMITS.name) };
}

function progressDeadlineExceeded(o: Raw): boolean {
  const conditions: Raw[] = Array.isArray(o?.status?.conditions) ? o.status.conditions : [];
  return conditions.some(
    (c) => c?.type === "Progressing" && c?.status === "False" && c?.reason === "ProgressDeadlineExceeded",
  );
}

/** Why a rollout is not complete, from its conditions: a failure first, else the progress condition. */
function whyNotComplete(o: Raw): { reason: string; message: string } | undefined {
  const conditions: Raw[] = Array.isArray(o?.status?.conditions) ? o.status.conditions : [];
  const pick =
    conditions.find((c) => c?.type === "ReplicaFailure" && c?.status === "True") ??
    conditions.find((c) => c?.type === "Progressing" && c?.status === "False") ??
    conditions.find((c) => c?.type === "Available" && c?.status === "False") ??
    conditions.find((c) => c?.type === "Progressing");
  if (!pick || (typeof pick.reason !== "string" && typeof pick.message !== "string")) return undefined;
  return { reason: cut(pick.reason, VIEW_LIMITS.name), message: cut(pick.message, VIEW_LIMITS.message) };
}

/** A Deployment's, StatefulSet's or DaemonSet's rollout, read as `kubectl rollout status` does. */
export function workloadRecord(kind: Rollout["kind"], o: Raw): WorkloadRecord {
  const spec = o?.spec ?? {};
  const status = o?.status ?? {};
  const observed = int(status.observedGeneration) >= int(o?.metadata?.generation);
  let desired: number;
  let updated: number;
  let ready: number;
  let available: number;
  let done: boolean;
  if (kind === "DaemonSet") {
    desired = int(status.desiredNumberScheduled);
    updated = int(status.updatedNumberScheduled);
    ready = int(status.numberReady);
    available = int(status.numberAvailable);
    done = updated === desired && available === desired;
  } else {
    desired = typeof spec.replicas === "number" ? int(spec.replicas) : 1;
    updated = int(status.updatedReplicas);
    ready = int(status.readyReplicas);
    available =
      kind === "StatefulSet"
        ? int(status.availableReplicas ?? status.readyReplicas)
        : int(status.availableReplicas);
    done =
      kind === "Deployment"
        ? updated === desired && int(status.replicas) === updated && available === desired
        : updated === desired &&
          ready === desired &&
          (status.updateRevision === undefined || status.currentRevision === status.updateRevision);
  }
  const state: RolloutState =
    observed && done
      ? "complete"
      : kind === "Deployment" && progressDeadlineExceeded(o)
        ? "stuck"
        : "progressing";
  const m = meta(o);
  const why = state === "complete" ? undefined : whyNotComplete(o);
  return {
    metadata: m,
    rollout: {
      kind,
      namespace: cut(m.namespace, VIEW_LIMITS.name),
      name: cut(m.name, VIEW_LIMITS.name),
      desired,
      updated,
      ready,
      available,
      state,
      ...why,
    },
  };
}

export function warningRecord(o: Raw): WarningRecord {
  const m = meta(o);
  const involved = o?.involvedObject ?? o?.regarding ?? {};
  const lastSeen =
    time(o?.lastTimestamp) ??
    time(o?.series?.lastObservedTime) ??
    time(o?.eventTime) ??
    time(o?.metadata?.creationTimestamp) ??
    new Date(0).toISOString();
  return {
    metadata: m,
    warning: {
      namespace: cut(m.namespace, VIEW_LIMITS.name),
      object: cut(`${involved.kind ?? ""}/${involved.name ?? ""}`, VIEW_LIMITS.name),
      reason: cut(o?.reason, VIEW_LIMITS.name),
      message: cut(o?.message ?? o?.note, VIEW_LIMITS.message),
      count: Math.max(1, int(o?.count ?? o?.series?.count)),
      lastSeen,
    },
  };
}
