// Phase 4 of a sync: the planned objects are applied rank by rank (server-side apply, forced, one
// field manager), each after its CRD is served and its ownership allows it. The inventory grows
// (the union of the previous one and this plan) once Namespaces exist, before namespaced objects.
import { type KubernetesObject, PatchStrategy } from "@kubernetes/client-node";
import { type InventoryEntries, OWNING_INVENTORY_ANNOTATION, refKey } from "./inventory.ts";
import { writeInventory } from "./inventory-store.ts";
import { content, errorMessage, objectSpec, pick, statusCode } from "./kube.ts";
import type { ManifestObject } from "./parse.ts";
import {
  type Applied,
  type ManifestProject,
  type ObjectOutcome,
  type ObjectStatus,
  type Planned,
  pause,
  type SyncContext,
} from "./sync.ts";

export interface AppliedObjects {
  /** What this sync's inventory lists so far. */
  kept: InventoryEntries;
  /** What was written, to await its readiness. */
  applied: Applied[];
  /** Set when the sync cannot go on (the inventory could not be grown): nothing is pruned. */
  error?: string;
}

/** Waits for a CRD of this sync to serve a kind; resolves with a problem, or undefined once served. */
type CrdWait = (p: Planned) => Promise<string | undefined>;

export async function applyObjects(
  sync: SyncContext,
  planned: readonly Planned[],
  previous: InventoryEntries,
  crdWaitMs: number,
): Promise<AppliedObjects> {
  const kept: InventoryEntries = new Map();
  const applied: Applied[] = [];
  const awaitCrd = crdWaiter(sync, Date.now() + Math.min(crdWaitMs, sync.project.reconcile_timeout));
  let unionWritten = false;
  for (const p of planned) {
    sync.signal?.throwIfAborted();
    if (p.rank === 3 && !unionWritten && !sync.dryRun) {
      unionWritten = true;
      const union = new Map(previous);
      for (const q of planned) union.set(refKey(q), { ref: pick(q), apiVersion: q.apiVersion });
      const error = await writeInventory(sync.api, sync.fieldManager, sync.location, sync.project.id, union);
      if (error) return { kept, applied, error };
    }
    const status = await applyObject(sync, p, previous, kept, awaitCrd);
    if (status) applied.push({ ...p, status });
  }
  return { kept, applied };
}

/** One kind's wait shared by every object of that kind, all within `deadline`. */
function crdWaiter(sync: SyncContext, deadline: number): CrdWait {
  const waits = new Map<string, Promise<string | undefined>>();
  return (p) => {
    const typeKey = `${p.apiVersion}/${p.kind}`;
    let waiting = waits.get(typeKey);
    if (!waiting) {
      waiting = awaitServed(sync, p, deadline);
      waits.set(typeKey, waiting);
    }
    return waiting;
  };
}

async function awaitServed(sync: SyncContext, p: Planned, deadline: number): Promise<string | undefined> {
  for (;;) {
    if ((await sync.served(p.apiVersion, p.kind).catch(() => undefined)) !== undefined) return undefined;
    if (Date.now() >= deadline || sync.signal?.aborted) {
      return `${p.apiVersion} ${p.kind} is not served: its CustomResourceDefinition was not established in time`;
    }
    await pause(sync.pollMs, sync.signal);
  }
}

/** Applies one object and reports it; resolves with its status when it was written. */
async function applyObject(
  sync: SyncContext,
  p: Planned,
  previous: InventoryEntries,
  kept: InventoryEntries,
  awaitCrd: CrdWait,
): Promise<ObjectStatus | undefined> {
  const key = refKey(p);
  const outcome = (status: ObjectStatus, error = ""): ObjectOutcome => ({
    ...pick(p),
    status,
    error,
    source: p.parsed.source,
  });
  const keepPrevious = () => {
    if (previous.has(key)) kept.set(key, previous.get(key)!);
  };
  if (p.awaitsCrd && sync.dryRun) {
    // Its CRD is not written in a dry run, so the server cannot check it: validated locally only.
    kept.set(key, { ref: pick(p), apiVersion: p.apiVersion });
    sync.report(outcome("applied"));
    return undefined;
  }
  const problem = p.awaitsCrd ? await awaitCrd(p) : undefined;
  if (problem) {
    keepPrevious();
    sync.report(outcome("failed", problem));
    return undefined;
  }
  let current: KubernetesObject | undefined;
  try {
    current = await sync.api.read(objectSpec(p.apiVersion, p));
  } catch (err) {
    if (statusCode(err) !== 404) {
      keepPrevious();
      sync.report(outcome("failed", `cannot read it: ${errorMessage(err)}`));
      return undefined;
    }
  }
  const refused = adoptionRefused(current, sync.location.id, sync.project.inventory_policy);
  if (refused) {
    sync.report(outcome("skipped", refused));
    return undefined;
  }
  kept.set(key, { ref: pick(p), apiVersion: p.apiVersion });
  if (sync.mode === "client") {
    sync.report(outcome("applied"));
    return undefined;
  }
  try {
    const status = await serverSideApply(sync, p, current);
    sync.report(outcome(status));
    return status;
  } catch (err) {
    sync.report(outcome("failed", errorMessage(err)));
    return undefined;
  }
}

/** Why inventory_policy keeps this sync from taking over an existing object, or undefined when it may. */
function adoptionRefused(
  current: KubernetesObject | undefined,
  inventoryId: string,
  policy: ManifestProject["inventory_policy"],
): string | undefined {
  const ownerOf = current?.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION];
  if (!current || ownerOf === inventoryId) return undefined;
  const adopt = policy === "adopt_all" || (ownerOf === undefined && policy === "adopt_if_no_inventory");
  if (adopt) return undefined;
  return ownerOf === undefined
    ? `it exists and belongs to no inventory; inventory_policy ${policy} does not adopt it`
    : `it belongs to another inventory (${ownerOf}); inventory_policy ${policy} does not adopt it`;
}

/** Writes the object, owned by this sync's inventory; resolves with whether it changed. */
async function serverSideApply(
  sync: SyncContext,
  p: Planned,
  current: KubernetesObject | undefined,
): Promise<"applied" | "unchanged"> {
  const body = structuredClone(p.parsed.object) as ManifestObject;
  body.metadata.namespace = p.namespace || undefined;
  if (!p.namespace) delete body.metadata.namespace;
  body.metadata.annotations = {
    ...body.metadata.annotations,
    [OWNING_INVENTORY_ANNOTATION]: sync.location.id,
  };
  const result = await sync.api.patch(
    body,
    undefined,
    sync.serverDryRun,
    sync.fieldManager,
    true,
    PatchStrategy.ServerSideApply,
  );
  const changed = sync.dryRun
    ? content(current) !== content(result)
    : !current || current.metadata?.resourceVersion !== result.metadata?.resourceVersion;
  return changed ? "applied" : "unchanged";
}
