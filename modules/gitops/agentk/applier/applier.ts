// The GitOps applier: one manifest project's files -> the cluster, as GitLab's applier (cli-utils)
// does it: server-side apply (forced, one field manager), CRDs and Namespaces first, an inventory
// per project, pruning what left Git, ownership per inventory_policy, then waiting for readiness.
// Each phase is a file of its own: plan.ts, apply-objects.ts, prune.ts, inventory-store.ts, wait.ts.
import type { KubeConfig } from "@kubernetes/client-node";
import { applyObjects } from "./apply-objects.ts";
import { type InventoryLocation, inventoryLocation } from "./inventory.ts";
import { readInventory, writeInventory } from "./inventory-store.ts";
import { ObjectApi, servedScope } from "./kube.ts";
import { parseManifests } from "./parse.ts";
import { planObjects, reportUnreadable } from "./plan.ts";
import { prune } from "./prune.ts";
import type { ApplierEvent, ManifestProject, ObjectOutcome, SyncContext } from "./sync.ts";
import { awaitApplied } from "./wait.ts";

export { errorMessage } from "./kube.ts";
export type { ApplierEvent, ManifestProject, ObjectOutcome, ObjectStatus } from "./sync.ts";

export interface SyncOutcome {
  objects: ObjectOutcome[];
  /** What kept the sync from completing (unreadable documents, the reconcile timeout, …); "" when it completed. */
  error: string;
  /** Nothing was written (dry_run_strategy client or server). */
  dryRun: boolean;
}

export interface ApplierOptions {
  kc: KubeConfig;
  /** Server-side apply's field manager. Default `agentk`. */
  fieldManager?: string;
  /** Whose inventories these are (part of every inventory id): the agent. Default `agentk`. */
  owner?: string;
  /** How often readiness, pruned objects' deletion and CRDs being served are checked. Default 1 s. */
  pollIntervalMs?: number;
  /** How long custom resources wait for a CRD of the same sync to be served. Default 60 s (or less: reconcile_timeout). */
  crdWaitMs?: number;
  onEvent?: (event: ApplierEvent) => void;
}

export interface ApplyRequest {
  project: ManifestProject;
  /** Whose inventory this is (default: the applier's `owner`). */
  owner?: string;
  /** The commit's files: path -> contents. */
  files: ReadonlyMap<string, Uint8Array | string>;
  /** Aborts the whole sync (the module stops). */
  signal?: AbortSignal;
  /** Ends waiting for readiness early (a newer commit arrived): pending objects are reported as not ready. */
  waitSignal?: AbortSignal;
}

export class Applier {
  readonly #api: ObjectApi;
  readonly #fieldManager: string;
  readonly #owner: string;
  readonly #pollMs: number;
  readonly #crdWaitMs: number;
  readonly #onEvent: (event: ApplierEvent) => void;

  constructor(options: ApplierOptions) {
    this.#api = ObjectApi.make(options.kc);
    this.#fieldManager = options.fieldManager ?? "agentk";
    this.#owner = options.owner ?? "agentk";
    this.#pollMs = options.pollIntervalMs ?? 1000;
    this.#crdWaitMs = options.crdWaitMs ?? 60_000;
    this.#onEvent = options.onEvent ?? (() => {});
  }

  /** Where `project`'s inventory is kept. */
  inventory(
    project: Pick<ManifestProject, "id" | "default_namespace">,
    owner = this.#owner,
  ): InventoryLocation {
    return inventoryLocation(owner, project.id, project.default_namespace);
  }

  /** Applies one commit of one manifest project; never rejects for a problem of the manifests or the cluster. */
  async apply(request: ApplyRequest): Promise<SyncOutcome> {
    const { project } = request;
    const outcomes: ObjectOutcome[] = [];
    const errors: string[] = [];
    const sync = this.#sync(request, outcomes);
    const { dryRun } = sync;
    const done = () => ({ objects: outcomes, error: errors.join("; "), dryRun });

    // 1. Read. 2. Plan.
    const { objects, problems } = parseManifests(request.files);
    const unreadable = reportUnreadable(problems, sync.report);
    if (unreadable) errors.push(unreadable);
    const { planned, seen } = await planObjects(objects, sync);

    // 3. The previous inventory: without it nothing can be pruned safely (the previous commit's objects are kept).
    const previous = await readInventory(this.#api, sync.location);
    if ("error" in previous) {
      errors.push(previous.error);
      return done();
    }

    // 4. Apply.
    const { kept, applied, error } = await applyObjects(sync, planned, previous.entries, this.#crdWaitMs);
    if (error) {
      errors.push(error);
      return done();
    }

    // 5. Prune what the previous inventory lists and this commit no longer holds.
    const prunable = [...previous.entries].filter(([key]) => !seen.has(key));
    if (problems.length > 0 || !project.prune) {
      for (const [key, entry] of prunable) kept.set(key, entry);
    } else {
      await prune(sync, prunable, kept);
    }

    // 6. The inventory, as it is now.
    if (!dryRun) {
      const err = await writeInventory(this.#api, this.#fieldManager, sync.location, project.id, kept);
      if (err) errors.push(err);
    }

    // 7. Wait for what was applied to become ready, within reconcile_timeout.
    if (!dryRun && applied.length > 0) {
      const notReady = await awaitApplied(sync, applied, outcomes, request.waitSignal, this.#onEvent);
      if (notReady) errors.push(notReady);
    }
    return done();
  }

  /** The context every phase of this sync reads; outcomes are collected in `outcomes`. */
  #sync(request: ApplyRequest, outcomes: ObjectOutcome[]): SyncContext {
    const { project } = request;
    const mode = project.dry_run_strategy;
    return {
      api: this.#api,
      fieldManager: this.#fieldManager,
      pollMs: this.#pollMs,
      project,
      location: this.inventory(project, request.owner),
      mode,
      dryRun: mode !== "none",
      serverDryRun: mode === "server" ? "All" : undefined,
      signal: request.signal,
      report: (outcome) => {
        outcomes.push(outcome);
        this.#onEvent({ type: "object", outcome });
      },
      served: (apiVersion, kind) => servedScope(this.#api, apiVersion, kind),
    };
  }
}
