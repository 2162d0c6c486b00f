// The inventory of one manifest project: a ConfigMap listing every object the project applied, in
// cli-utils' format (GitLab's applier), so that what leaves Git can be pruned and what another
// project applied is left alone.
import { createHash } from "node:crypto";

/** On every applied object: the id of the inventory that owns it (cli-utils' annotation). */
export const OWNING_INVENTORY_ANNOTATION = "config.k8s.io/owning-inventory";
/** On the inventory ConfigMap: its id (cli-utils' label). */
export const INVENTORY_ID_LABEL = "cli-utils.sigs.k8s.io/inventory-id";
/** On the inventory ConfigMap: the manifest project, for people reading the cluster. */
export const INVENTORY_PROJECT_ANNOTATION = "gitops.agentk/project";

/** An object's identity as an inventory keeps it. */
export interface ObjectRef {
  group: string;
  kind: string;
  /** "" for cluster-scoped objects. */
  namespace: string;
  name: string;
}

/** cli-utils' ObjMetadata string: `<namespace>_<name>_<group>_<kind>` (no part can hold "_"). */
export function refKey(r: ObjectRef): string {
  return `${r.namespace}_${r.name}_${r.group}_${r.kind}`;
}

export function parseRefKey(key: string): ObjectRef | undefined {
  const parts = key.split("_");
  if (parts.length !== 4 || !parts[1] || !parts[3]) return undefined;
  return { namespace: parts[0]!, name: parts[1], group: parts[2]!, kind: parts[3] };
}

/** Where a project's inventory lives and the id its objects carry. */
export interface InventoryLocation {
  id: string;
  namespace: string;
  name: string;
}

/**
 * The inventory of `projectId` applied by `owner` (the agent): its id is a hash of both, its name
 * readable (`gitops-inventory-<project slug>-<hash>`), its namespace the project's default one.
 */
export function inventoryLocation(owner: string, projectId: string, namespace: string): InventoryLocation {
  const hash = createHash("sha256").update(`${owner}\0${projectId}`).digest("hex");
  const slug = projectId
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 100);
  return {
    id: `gitops-${hash.slice(0, 32)}`,
    namespace,
    name: `gitops-inventory-${slug ? `${slug}-` : ""}${hash.slice(0, 10)}`,
  };
}

/** One object the inventory lists. */
export interface InventoryEntry {
  ref: ObjectRef;
  apiVersion: string;
}

/** An inventory's entries: object key -> the apiVersion it was applied with (cli-utils keeps ""). */
export type InventoryEntries = Map<string, InventoryEntry>;

export function inventoryData(entries: InventoryEntries): Record<string, string> {
  return Object.fromEntries(
    [...entries].sort(([a], [b]) => a.localeCompare(b)).map(([k, e]) => [k, e.apiVersion]),
  );
}

export function entriesOf(data: Record<string, string> | undefined): InventoryEntries {
  const entries: InventoryEntries = new Map();
  for (const [key, apiVersion] of Object.entries(data ?? {})) {
    const ref = parseRefKey(key);
    if (ref) entries.set(key, { ref, apiVersion: apiVersion || (ref.group === "" ? "v1" : "") });
  }
  return entries;
}
