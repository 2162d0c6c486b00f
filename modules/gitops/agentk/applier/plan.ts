// Phases 1 and 2 of a sync: what could not be read is reported, and the rest is planned: each
// object's scope (from discovery, or from a CRD of the same sync), its namespace, and its rank.
import { refKey } from "./inventory.ts";
import { groupOf, type ParsedManifests, type ParsedObject } from "./parse.ts";
import { CRD_GROUP, type Planned, type SyncContext } from "./sync.ts";

/** Reports each unreadable document; resolves with the sync's error for them ("" when none). */
export function reportUnreadable(
  problems: ParsedManifests["problems"],
  report: SyncContext["report"],
): string {
  for (const p of problems) {
    report({
      group: "",
      kind: "",
      namespace: "",
      name: "",
      status: "failed",
      error: `${p.source}: document ${p.document}: ${p.error}`,
      source: p.source,
    });
  }
  if (problems.length === 0) return "";
  // The files named here too: this is the sync's error, what kas's API shows first.
  const files = [...new Set(problems.map((p) => p.source))];
  const named = files.slice(0, 5).join(", ") + (files.length > 5 ? ` and ${files.length - 5} more` : "");
  return `${problems.length} document(s) could not be read; nothing is pruned until they are fixed: ${named}`;
}

export interface Plan {
  /** In the order to apply them: by rank, then file and document order. */
  planned: Planned[];
  /** refKey -> the document, for every object this commit holds (what is not pruned). */
  seen: Map<string, ParsedObject>;
}

/** Plans the objects to apply; those the cluster cannot serve, or defined twice, are reported failed. */
export async function planObjects(objects: readonly ParsedObject[], sync: SyncContext): Promise<Plan> {
  const crds = crdScopes(objects);
  const planned: Planned[] = [];
  const seen = new Map<string, ParsedObject>();
  for (const parsed of objects) {
    sync.signal?.throwIfAborted();
    const { object, source } = parsed;
    const group = groupOf(object.apiVersion);
    const scope = await scopeOf(parsed, crds, sync);
    if (!scope) continue;
    const namespace = scope.namespaced ? object.metadata.namespace || sync.project.default_namespace : "";
    const ref = { group, kind: object.kind, namespace, name: object.metadata.name };
    const key = refKey(ref);
    const earlier = seen.get(key);
    if (earlier) {
      sync.report({
        ...ref,
        source,
        status: "failed",
        error: `${source}: document ${parsed.document}: the same object as ${earlier.source} document ${earlier.document}`,
      });
      continue;
    }
    seen.set(key, parsed);
    const rank = applyRank(group, object.kind, scope.namespaced);
    planned.push({ ...ref, parsed, apiVersion: object.apiVersion, rank, awaitsCrd: scope.awaitsCrd });
  }
  planned.sort((a, b) => a.rank - b.rank); // stable: file and document order within a rank
  return { planned, seen };
}

/** "<group>/<kind>" -> scope, for each kind a CRD of this sync defines. */
function crdScopes(objects: readonly ParsedObject[]): Map<string, "Namespaced" | "Cluster"> {
  const crds = new Map<string, "Namespaced" | "Cluster">();
  for (const { object } of objects) {
    if (object.apiVersion.startsWith(`${CRD_GROUP}/`) && object.kind === "CustomResourceDefinition") {
      const spec = object.spec as { group?: string; scope?: string; names?: { kind?: string } } | undefined;
      if (spec?.group && spec.names?.kind) {
        crds.set(`${spec.group}/${spec.names.kind}`, spec.scope === "Cluster" ? "Cluster" : "Namespaced");
      }
    }
  }
  return crds;
}

/** The object's scope, or undefined (reported failed) when neither the cluster nor this sync defines its kind. */
async function scopeOf(
  { object, source }: ParsedObject,
  crds: Map<string, "Namespaced" | "Cluster">,
  sync: SyncContext,
): Promise<{ namespaced: boolean; awaitsCrd: boolean } | undefined> {
  const group = groupOf(object.apiVersion);
  const served = await sync.served(object.apiVersion, object.kind);
  if (served !== undefined) return { namespaced: served, awaitsCrd: false };
  const defined = crds.get(`${group}/${object.kind}`);
  if (defined) return { namespaced: defined === "Namespaced", awaitsCrd: true };
  sync.report({
    group,
    kind: object.kind,
    name: object.metadata.name,
    source,
    namespace: object.metadata.namespace ?? "",
    status: "failed",
    error: `the cluster does not serve ${object.apiVersion} ${object.kind}`,
  });
  return undefined;
}

/** 0 CRDs, 1 Namespaces, 2 other cluster-scoped, 3 namespaced. */
function applyRank(group: string, kind: string, namespaced: boolean): number {
  if (group === CRD_GROUP && kind === "CustomResourceDefinition") return 0;
  if (group === "" && kind === "Namespace") return 1;
  return namespaced ? 3 : 2;
}
