// Phase 5 of a sync: what the previous inventory lists and this commit no longer holds is deleted
// (CRDs last, Namespaces before them), if it still belongs to this inventory, then awaited until
// gone within prune_timeout. What could not be pruned stays in the inventory.
import type { KubernetesObject } from "@kubernetes/client-node";
import {
  type InventoryEntries,
  type InventoryEntry,
  type ObjectRef,
  OWNING_INVENTORY_ANNOTATION,
} from "./inventory.ts";
import { errorMessage, objectSpec, statusCode } from "./kube.ts";
import { CRD_GROUP, type ObjectOutcome, type ObjectStatus, pause, type SyncContext } from "./sync.ts";

const PROPAGATION = { orphan: "Orphan", background: "Background", foreground: "Foreground" } as const;

interface Deleted {
  key: string;
  entry: InventoryEntry;
}

/** Prunes `prunable` (refKey -> entry); what stays is added to `kept`. */
export async function prune(
  sync: SyncContext,
  prunable: Array<[string, InventoryEntry]>,
  kept: InventoryEntries,
): Promise<void> {
  prunable.sort(([, a], [, b]) => pruneRank(a) - pruneRank(b));
  const deleted: Deleted[] = [];
  for (const [key, entry] of prunable) {
    sync.signal?.throwIfAborted();
    const result = await pruneObject(sync, entry);
    if (result === "kept") kept.set(key, entry);
    else if (result === "deleted") deleted.push({ key, entry });
  }
  await awaitDeleted(sync, deleted, kept);
}

/** 0 namespaced, 1 other cluster-scoped, 2 Namespaces, 3 CRDs: what their objects hold goes first. */
function pruneRank({ ref }: { ref: ObjectRef }): number {
  if (ref.group === CRD_GROUP && ref.kind === "CustomResourceDefinition") return 3;
  if (ref.group === "" && ref.kind === "Namespace") return 2;
  return ref.namespace === "" ? 1 : 0;
}

/**
 * Deletes one object and reports it (except when it is already gone, or deleted but maybe not gone
 * yet: "deleted"); "kept" when it must stay in the inventory.
 */
async function pruneObject(sync: SyncContext, entry: InventoryEntry): Promise<"kept" | "deleted" | "done"> {
  const { project, location, mode } = sync;
  const spec = objectSpec(entry.apiVersion, entry.ref);
  const outcome = (status: ObjectStatus, error = ""): ObjectOutcome => ({
    ...entry.ref,
    status,
    error,
    source: "",
  });
  if ((await sync.served(entry.apiVersion, entry.ref.kind)) === undefined) return "done"; // its kind is gone, so is it
  let current: KubernetesObject;
  try {
    current = await sync.api.read(spec);
  } catch (err) {
    if (statusCode(err) === 404) return "done"; // already gone
    sync.report(outcome("failed", `cannot read it to prune it: ${errorMessage(err)}`));
    return "kept";
  }
  const ownerOf = current.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION];
  if (ownerOf !== location.id && project.inventory_policy !== "adopt_all") {
    const owner = ownerOf ? `another inventory (${ownerOf})` : "no inventory";
    sync.report(outcome("skipped", `not pruned: it belongs to ${owner} now`));
    return "done";
  }
  if (mode === "client") {
    sync.report(outcome("pruned"));
    return "done";
  }
  try {
    await sync.api.delete(
      spec,
      undefined,
      sync.serverDryRun,
      undefined,
      undefined,
      PROPAGATION[project.prune_propagation_policy],
    );
    if (!sync.dryRun) return "deleted";
    sync.report(outcome("pruned"));
    return "done";
  } catch (err) {
    if (statusCode(err) === 404) return "done";
    sync.report(outcome("failed", `cannot prune it: ${errorMessage(err)}`));
    return "kept";
  }
}

/** Deleted objects may linger (finalizers, foreground deletion): waits for them, within prune_timeout. */
async function awaitDeleted(sync: SyncContext, deleted: Deleted[], kept: InventoryEntries): Promise<void> {
  const { project, signal } = sync;
  const pruneDeadline = Date.now() + project.prune_timeout;
  let pending = deleted;
  while (pending.length > 0) {
    const still: Deleted[] = [];
    for (const d of pending) {
      const gone = await sync.api.read(objectSpec(d.entry.apiVersion, d.entry.ref)).then(
        () => false,
        (err: unknown) => statusCode(err) === 404,
      );
      if (gone) sync.report({ ...d.entry.ref, status: "pruned", error: "", source: "" });
      else still.push(d);
    }
    pending = still;
    if (pending.length === 0) break;
    if (Date.now() >= pruneDeadline || signal?.aborted) {
      for (const d of pending) {
        kept.set(d.key, d.entry);
        sync.report({
          ...d.entry.ref,
          status: "failed",
          error: `deleted but still present after prune_timeout (${project.prune_timeout} ms)`,
          source: "",
        });
      }
      break;
    }
    await pause(sync.pollMs, signal);
  }
}
