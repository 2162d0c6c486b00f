// When an applied object counts as reconciled (kstatus's rules, as GitLab's applier waits for them).

export type Readiness = { ready: true } | { ready: false; failed?: boolean; reason: string };

interface Live {
  kind?: string;
  metadata?: { generation?: number };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

const num = (v: unknown): number => (typeof v === "number" ? v : 0);

function conditionTrue(live: Live, type: string): boolean {
  const conditions = live.status?.conditions;
  return (
    Array.isArray(conditions) &&
    conditions.some((c: { type?: string; status?: string }) => c?.type === type && c?.status === "True")
  );
}

function observed(live: Live): Readiness | undefined {
  const generation = live.metadata?.generation ?? 0;
  const seen = live.status?.observedGeneration;
  if (typeof seen !== "number" || seen < generation) {
    return { ready: false, reason: `generation ${generation} not observed yet (observed ${seen ?? "none"})` };
  }
  return undefined;
}

/** Whether `live` (the object as the API server has it now) is ready. */
export function readiness(group: string, live: Live): Readiness {
  const kind = live.kind ?? "";
  const status = live.status ?? {};
  if (group === "apps" && kind === "Deployment") {
    const replicas = typeof live.spec?.replicas === "number" ? live.spec.replicas : 1;
    const notObserved = observed(live);
    if (notObserved) return notObserved;
    const updated = num(status.updatedReplicas);
    const available = num(status.availableReplicas);
    const total = typeof status.replicas === "number" ? status.replicas : updated;
    if (updated < replicas) return { ready: false, reason: `${updated} of ${replicas} replicas updated` };
    if (total > updated)
      return { ready: false, reason: `${total - updated} old replicas pending termination` };
    if (available < replicas)
      return { ready: false, reason: `${available} of ${replicas} replicas available` };
    return { ready: true };
  }
  if (group === "apps" && kind === "StatefulSet") {
    const replicas = typeof live.spec?.replicas === "number" ? live.spec.replicas : 1;
    const notObserved = observed(live);
    if (notObserved) return notObserved;
    const ready = num(status.readyReplicas);
    if (ready < replicas) return { ready: false, reason: `${ready} of ${replicas} replicas ready` };
    const strategy = (live.spec?.updateStrategy as { type?: string } | undefined)?.type ?? "RollingUpdate";
    if (strategy === "RollingUpdate") {
      if (num(status.updatedReplicas) < replicas) {
        return { ready: false, reason: `${num(status.updatedReplicas)} of ${replicas} replicas updated` };
      }
      if (status.updateRevision !== undefined && status.currentRevision !== status.updateRevision) {
        return { ready: false, reason: `revision ${String(status.updateRevision)} rolling out` };
      }
    }
    return { ready: true };
  }
  if (group === "apps" && kind === "DaemonSet") {
    const notObserved = observed(live);
    if (notObserved) return notObserved;
    const desired = num(status.desiredNumberScheduled);
    const updated = num(status.updatedNumberScheduled);
    const available = num(status.numberAvailable);
    if (updated < desired) return { ready: false, reason: `${updated} of ${desired} pods updated` };
    if (available < desired) return { ready: false, reason: `${available} of ${desired} pods available` };
    return { ready: true };
  }
  if (group === "batch" && kind === "Job") {
    if (conditionTrue(live, "Failed")) return { ready: false, failed: true, reason: "the job failed" };
    if (conditionTrue(live, "Complete")) return { ready: true };
    return { ready: false, reason: "the job has not completed" };
  }
  if (group === "apiextensions.k8s.io" && kind === "CustomResourceDefinition") {
    return conditionTrue(live, "Established")
      ? { ready: true }
      : { ready: false, reason: "the CustomResourceDefinition is not established" };
  }
  return { ready: true };
}
