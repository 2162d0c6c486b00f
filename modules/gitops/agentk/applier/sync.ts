// What one sync's phases share: the outcome types, the planned objects, and the sync's context.
import { setTimeout as sleep } from "node:timers/promises";
import type { AgentConfiguration } from "../../../runtime/index.ts";
import type { InventoryLocation, ObjectRef } from "./inventory.ts";
import type { ObjectApi } from "./kube.ts";
import type { ParsedObject } from "./parse.ts";

export type ManifestProject = NonNullable<AgentConfiguration["gitops"]>["manifest_projects"][number];

export type ObjectStatus = "applied" | "unchanged" | "pruned" | "failed" | "skipped";

/** One object's outcome (the fields of gitops.v1.ObjectResult). */
export interface ObjectOutcome extends ObjectRef {
  status: ObjectStatus;
  /** Why it failed or was skipped ("" otherwise). */
  error: string;
  /** The file it came from ("" for a pruned object). */
  source: string;
}

export type ApplierEvent =
  /** Applying is done; these objects are awaited (each round of polling reports those still pending). */
  { type: "waiting"; pending: ObjectRef[] } | { type: "object"; outcome: ObjectOutcome };

export const CRD_GROUP = "apiextensions.k8s.io";

export interface Planned extends ObjectRef {
  parsed: ParsedObject;
  apiVersion: string;
  /** 0 CRDs, 1 Namespaces, 2 other cluster-scoped, 3 namespaced. */
  rank: number;
  /** Served only once a CRD of this sync is (the kind was unknown when planning). */
  awaitsCrd: boolean;
}

/** A planned object that was written, and how. */
export type Applied = Planned & { status: ObjectStatus };

/** One sync of one manifest project: what every phase reads. */
export interface SyncContext {
  api: ObjectApi;
  fieldManager: string;
  pollMs: number;
  project: ManifestProject;
  location: InventoryLocation;
  mode: ManifestProject["dry_run_strategy"];
  /** Nothing is written (dry_run_strategy client or server). */
  dryRun: boolean;
  /** The API's dryRun parameter: "All" for a server dry run. */
  serverDryRun: "All" | undefined;
  signal: AbortSignal | undefined;
  /** Records an object's outcome (and tells the applier's listener). */
  report(outcome: ObjectOutcome): void;
  /** Whether the kind is namespaced, or undefined when the cluster does not serve it. */
  served(apiVersion: string, kind: string): Promise<boolean | undefined>;
}

/** Sleeps one poll interval (or `ms`), cut short by `signal`; never rejects. */
export function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return sleep(ms, undefined, signal ? { signal } : {}).then(
    () => {},
    () => {},
  );
}
