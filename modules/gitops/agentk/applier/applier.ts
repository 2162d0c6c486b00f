// The GitOps applier: one manifest project's files -> the cluster, as GitLab's applier (cli-utils)
// does it: server-side apply (forced, one field manager), CRDs and Namespaces first, an inventory
// per project, pruning what left Git, ownership per inventory_policy, then waiting for readiness.
import { setTimeout as sleep } from "node:timers/promises";
import {
  ApiException,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  type V1APIResource,
} from "@kubernetes/client-node";
import type { AgentConfiguration } from "../../../runtime/index.ts";
import {
  entriesOf,
  INVENTORY_ID_LABEL,
  INVENTORY_PROJECT_ANNOTATION,
  type InventoryEntries,
  type InventoryLocation,
  inventoryData,
  inventoryLocation,
  type ObjectRef,
  OWNING_INVENTORY_ANNOTATION,
  refKey,
} from "./inventory.ts";
import { groupOf, type ManifestObject, type ParsedObject, parseManifests } from "./parse.ts";
import { readiness } from "./readiness.ts";

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

export interface SyncOutcome {
  objects: ObjectOutcome[];
  /** What kept the sync from completing (unreadable documents, the reconcile timeout, …); "" when it completed. */
  error: string;
  /** Nothing was written (dry_run_strategy client or server). */
  dryRun: boolean;
}

export type ApplierEvent =
  /** Applying is done; these objects are awaited (each round of polling reports those still pending). */
  { type: "waiting"; pending: ObjectRef[] } | { type: "object"; outcome: ObjectOutcome };

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

const PROPAGATION = { orphan: "Orphan", background: "Background", foreground: "Foreground" } as const;
const CRD_GROUP = "apiextensions.k8s.io";

interface Planned extends ObjectRef {
  parsed: ParsedObject;
  apiVersion: string;
  /** 0 CRDs, 1 Namespaces, 2 other cluster-scoped, 3 namespaced. */
  rank: number;
  /** Served only once a CRD of this sync is (the kind was unknown when planning). */
  awaitsCrd: boolean;
}

/** The message of a Kubernetes API error (its Status), or the error's own. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body = err.body as unknown;
    let message: string | undefined;
    if (typeof body === "string") {
      try {
        message = (JSON.parse(body) as { message?: string }).message;
      } catch {
        message = body;
      }
    } else if (typeof body === "object" && body !== null) {
      message = (body as { message?: string }).message;
    }
    return `HTTP ${err.code}: ${message || "no message"}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** KubernetesObjectApi with its discovery (which kinds are served, and whether namespaced) in reach. */
class ObjectApi extends KubernetesObjectApi {
  static make(kc: KubeConfig): ObjectApi {
    const client = kc.makeApiClient(ObjectApi);
    client.setDefaultNamespace(kc);
    return client;
  }

  /** The served resource of `kind` in `apiVersion` (cached; a kind not in the cache is looked up again). */
  served(apiVersion: string, kind: string): Promise<V1APIResource | undefined> {
    return this.resource(apiVersion, kind);
  }
}

const statusCode = (err: unknown) => (err instanceof ApiException ? err.code : undefined);

/** The object minus what the server writes on its own: to tell a dry run's change from a no-op. */
function content(o: KubernetesObject | undefined): string {
  if (!o) return "";
  const { metadata, ...rest } = o as KubernetesObject & { status?: unknown };
  const { managedFields: _m, resourceVersion: _r, generation: _g, ...meta } = metadata ?? {};
  delete (rest as { status?: unknown }).status;
  return stableJson({ ...rest, metadata: meta });
}

function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, value: unknown) =>
    value && typeof value === "object" && !Array.isArray(value) && !(value instanceof Date)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b)))
      : value,
  );
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
    const { project, signal } = request;
    const mode = project.dry_run_strategy;
    const dryRun = mode !== "none";
    const serverDryRun = mode === "server" ? "All" : undefined;
    const outcomes: ObjectOutcome[] = [];
    const errors: string[] = [];
    const report = (outcome: ObjectOutcome) => {
      outcomes.push(outcome);
      this.#onEvent({ type: "object", outcome });
    };
    const location = this.inventory(project, request.owner);

    // 1. Read.
    const { objects, problems } = parseManifests(request.files);
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
    if (problems.length > 0) {
      // The files named here too: this is the sync's error, what kas's API shows first.
      const files = [...new Set(problems.map((p) => p.source))];
      const named = files.slice(0, 5).join(", ") + (files.length > 5 ? ` and ${files.length - 5} more` : "");
      errors.push(
        `${problems.length} document(s) could not be read; nothing is pruned until they are fixed: ${named}`,
      );
    }

    // 2. Plan: each object's scope from discovery (or from a CRD of this sync), its namespace, its rank.
    const crds = new Map<string, "Namespaced" | "Cluster">(); // "<group>/<kind>" defined by a CRD of this sync
    for (const { object } of objects) {
      if (object.apiVersion.startsWith(`${CRD_GROUP}/`) && object.kind === "CustomResourceDefinition") {
        const spec = object.spec as { group?: string; scope?: string; names?: { kind?: string } } | undefined;
        if (spec?.group && spec.names?.kind) {
          crds.set(`${spec.group}/${spec.names.kind}`, spec.scope === "Cluster" ? "Cluster" : "Namespaced");
        }
      }
    }
    const planned: Planned[] = [];
    const seen = new Map<string, ParsedObject>();
    for (const parsed of objects) {
      signal?.throwIfAborted();
      const { object, source } = parsed;
      const group = groupOf(object.apiVersion);
      const base = { group, kind: object.kind, name: object.metadata.name, source };
      let namespaced: boolean;
      let awaitsCrd = false;
      const served = await this.#served(object.apiVersion, object.kind);
      if (served !== undefined) {
        namespaced = served;
      } else if (crds.has(`${group}/${object.kind}`)) {
        namespaced = crds.get(`${group}/${object.kind}`) === "Namespaced";
        awaitsCrd = true;
      } else {
        report({
          ...base,
          namespace: object.metadata.namespace ?? "",
          status: "failed",
          error: `the cluster does not serve ${object.apiVersion} ${object.kind}`,
        });
        continue;
      }
      const namespace = namespaced ? object.metadata.namespace || project.default_namespace : "";
      const ref = { group, kind: object.kind, namespace, name: object.metadata.name };
      const key = refKey(ref);
      const earlier = seen.get(key);
      if (earlier) {
        report({
          ...ref,
          source,
          status: "failed",
          error: `${source}: document ${parsed.document}: the same object as ${earlier.source} document ${earlier.document}`,
        });
        continue;
      }
      seen.set(key, parsed);
      const rank =
        group === CRD_GROUP && object.kind === "CustomResourceDefinition"
          ? 0
          : group === "" && object.kind === "Namespace"
            ? 1
            : namespaced
              ? 3
              : 2;
      planned.push({ ...ref, parsed, apiVersion: object.apiVersion, rank, awaitsCrd });
    }
    planned.sort((a, b) => a.rank - b.rank); // stable: file and document order within a rank

    // 3. The previous inventory.
    let previous: InventoryEntries = new Map();
    try {
      const cm = (await this.#api.read({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: location.name, namespace: location.namespace },
      })) as KubernetesObject & { data?: Record<string, string> };
      previous = entriesOf(cm.data);
    } catch (err) {
      if (statusCode(err) !== 404) {
        errors.push(`cannot read the inventory ${location.namespace}/${location.name}: ${errorMessage(err)}`);
        // Without it nothing can be pruned safely: objects of the previous commit are kept.
        return { objects: outcomes, error: errors.join("; "), dryRun };
      }
    }

    // 4. Apply, rank by rank; the inventory grows (union) once Namespaces exist, before namespaced objects.
    const kept: InventoryEntries = new Map(); // what this sync's inventory lists
    const applied: Array<Planned & { status: ObjectStatus }> = [];
    const crdWait = new Map<string, Promise<string | undefined>>();
    const crdDeadline = Date.now() + Math.min(this.#crdWaitMs, project.reconcile_timeout);
    let unionWritten = false;
    for (const p of planned) {
      signal?.throwIfAborted();
      if (p.rank === 3 && !unionWritten && !dryRun) {
        unionWritten = true;
        const union = new Map(previous);
        for (const q of planned) union.set(refKey(q), { ref: pick(q), apiVersion: q.apiVersion });
        const err = await this.#writeInventory(location, project.id, union);
        if (err) {
          errors.push(err);
          return { objects: outcomes, error: errors.join("; "), dryRun };
        }
      }
      const key = refKey(p);
      const outcome = (status: ObjectStatus, error = ""): ObjectOutcome => ({
        ...pick(p),
        status,
        error,
        source: p.parsed.source,
      });
      if (p.awaitsCrd && dryRun) {
        // Its CRD is not written in a dry run, so the server cannot check it: validated locally only.
        kept.set(key, { ref: pick(p), apiVersion: p.apiVersion });
        report(outcome("applied"));
        continue;
      }
      if (p.awaitsCrd) {
        const typeKey = `${p.apiVersion}/${p.kind}`;
        let waiting = crdWait.get(typeKey);
        if (!waiting) {
          waiting = this.#awaitServed(p, crdDeadline, signal);
          crdWait.set(typeKey, waiting);
        }
        const problem = await waiting;
        if (problem) {
          if (previous.has(key)) kept.set(key, previous.get(key)!);
          report(outcome("failed", problem));
          continue;
        }
      }
      let current: KubernetesObject | undefined;
      try {
        current = await this.#api.read({
          apiVersion: p.apiVersion,
          kind: p.kind,
          metadata: { name: p.name, ...(p.namespace && { namespace: p.namespace }) },
        });
      } catch (err) {
        if (statusCode(err) !== 404) {
          if (previous.has(key)) kept.set(key, previous.get(key)!);
          report(outcome("failed", `cannot read it: ${errorMessage(err)}`));
          continue;
        }
      }
      const ownerOf = current?.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION];
      if (current && ownerOf !== location.id) {
        const policy = project.inventory_policy;
        const adopt = policy === "adopt_all" || (ownerOf === undefined && policy === "adopt_if_no_inventory");
        if (!adopt) {
          report(
            outcome(
              "skipped",
              ownerOf === undefined
                ? `it exists and belongs to no inventory; inventory_policy ${policy} does not adopt it`
                : `it belongs to another inventory (${ownerOf}); inventory_policy ${policy} does not adopt it`,
            ),
          );
          continue;
        }
      }
      kept.set(key, { ref: pick(p), apiVersion: p.apiVersion });
      if (mode === "client") {
        report(outcome("applied"));
        continue;
      }
      const body = structuredClone(p.parsed.object) as ManifestObject;
      body.metadata.namespace = p.namespace || undefined;
      if (!p.namespace) delete body.metadata.namespace;
      body.metadata.annotations = {
        ...body.metadata.annotations,
        [OWNING_INVENTORY_ANNOTATION]: location.id,
      };
      try {
        const result = await this.#api.patch(
          body,
          undefined,
          serverDryRun,
          this.#fieldManager,
          true,
          PatchStrategy.ServerSideApply,
        );
        const changed = dryRun
          ? content(current) !== content(result)
          : !current || current.metadata?.resourceVersion !== result.metadata?.resourceVersion;
        const status = changed ? "applied" : "unchanged";
        applied.push({ ...p, status });
        report(outcome(status));
      } catch (err) {
        report(outcome("failed", errorMessage(err)));
      }
    }

    // 5. Prune what the previous inventory lists and this commit no longer holds.
    const prunable = [...previous].filter(([key]) => !seen.has(key));
    if (problems.length > 0 || !project.prune) {
      for (const [key, entry] of prunable) kept.set(key, entry);
    } else {
      const pruneRank = ({ ref }: { ref: ObjectRef }) =>
        ref.group === CRD_GROUP && ref.kind === "CustomResourceDefinition"
          ? 3
          : ref.group === "" && ref.kind === "Namespace"
            ? 2
            : ref.namespace === ""
              ? 1
              : 0;
      prunable.sort(([, a], [, b]) => pruneRank(a) - pruneRank(b));
      const deleted: Array<{ key: string; entry: { ref: ObjectRef; apiVersion: string } }> = [];
      for (const [key, entry] of prunable) {
        signal?.throwIfAborted();
        const spec = {
          apiVersion: entry.apiVersion,
          kind: entry.ref.kind,
          metadata: { name: entry.ref.name, ...(entry.ref.namespace && { namespace: entry.ref.namespace }) },
        };
        const outcome = (status: ObjectStatus, error = ""): ObjectOutcome => ({
          ...entry.ref,
          status,
          error,
          source: "",
        });
        if ((await this.#served(entry.apiVersion, entry.ref.kind)) === undefined) continue; // its kind is gone, so is it
        let current: KubernetesObject;
        try {
          current = await this.#api.read(spec);
        } catch (err) {
          if (statusCode(err) === 404) continue; // already gone
          kept.set(key, entry);
          report(outcome("failed", `cannot read it to prune it: ${errorMessage(err)}`));
          continue;
        }
        const ownerOf = current.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION];
        if (ownerOf !== location.id && project.inventory_policy !== "adopt_all") {
          report(
            outcome(
              "skipped",
              `not pruned: it belongs to ${ownerOf ? `another inventory (${ownerOf})` : "no inventory"} now`,
            ),
          );
          continue;
        }
        if (mode === "client") {
          report(outcome("pruned"));
          continue;
        }
        try {
          await this.#api.delete(
            spec,
            undefined,
            serverDryRun,
            undefined,
            undefined,
            PROPAGATION[project.prune_propagation_policy],
          );
          if (dryRun) report(outcome("pruned"));
          else deleted.push({ key, entry });
        } catch (err) {
          if (statusCode(err) === 404) continue;
          kept.set(key, entry);
          report(outcome("failed", `cannot prune it: ${errorMessage(err)}`));
        }
      }
      // Deleted objects may linger (finalizers, foreground deletion): wait for them, within prune_timeout.
      const pruneDeadline = Date.now() + project.prune_timeout;
      let pending = deleted;
      while (pending.length > 0) {
        const still: typeof pending = [];
        for (const d of pending) {
          const gone = await this.#api
            .read({
              apiVersion: d.entry.apiVersion,
              kind: d.entry.ref.kind,
              metadata: {
                name: d.entry.ref.name,
                ...(d.entry.ref.namespace && { namespace: d.entry.ref.namespace }),
              },
            })
            .then(
              () => false,
              (err: unknown) => statusCode(err) === 404,
            );
          if (gone) report({ ...d.entry.ref, status: "pruned", error: "", source: "" });
          else still.push(d);
        }
        pending = still;
        if (pending.length === 0) break;
        if (Date.now() >= pruneDeadline || signal?.aborted) {
          for (const d of pending) {
            kept.set(d.key, d.entry);
            report({
              ...d.entry.ref,
              status: "failed",
              error: `deleted but still present after prune_timeout (${project.prune_timeout} ms)`,
              source: "",
            });
          }
          break;
        }
        await sleep(this.#pollMs, undefined, signal ? { signal } : {}).catch(() => {});
      }
    }

    // 6. The inventory, as it is now.
    if (!dryRun) {
      const err = await this.#writeInventory(location, project.id, kept);
      if (err) errors.push(err);
    }

    // 7. Wait for what was applied to become ready, within reconcile_timeout.
    if (!dryRun && applied.length > 0) {
      const notReady = await this.#awaitReady(applied, project.reconcile_timeout, request);
      if (notReady.size > 0) {
        for (const o of outcomes) {
          const reason = o.source && notReady.get(refKey(o));
          if (reason) {
            o.status = "failed";
            o.error = reason;
          }
        }
        const failed = [...notReady.values()].some((r) => r.startsWith("failed"));
        errors.push(
          request.waitSignal?.aborted && !failed
            ? `${notReady.size} object(s) not ready yet when the wait was cut short`
            : `${notReady.size} object(s) not ready within reconcile_timeout (${project.reconcile_timeout} ms)`,
        );
      }
    }
    return { objects: outcomes, error: errors.join("; "), dryRun };
  }

  /** Whether the kind is namespaced, or undefined when the cluster does not serve it. */
  async #served(apiVersion: string, kind: string): Promise<boolean | undefined> {
    try {
      const resource = await this.#api.served(apiVersion, kind);
      return resource ? resource.namespaced : undefined;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  /** Waits for a CRD of this sync to serve `p`'s kind; resolves with a problem, or undefined once served. */
  async #awaitServed(
    p: Planned,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<string | undefined> {
    for (;;) {
      if ((await this.#served(p.apiVersion, p.kind).catch(() => undefined)) !== undefined) return undefined;
      if (Date.now() >= deadline || signal?.aborted) {
        return `${p.apiVersion} ${p.kind} is not served: its CustomResourceDefinition was not established in time`;
      }
      await sleep(this.#pollMs, undefined, signal ? { signal } : {}).catch(() => {});
    }
  }

  async #writeInventory(
    location: InventoryLocation,
    projectId: string,
    entries: InventoryEntries,
  ): Promise<string | undefined> {
    try {
      await this.#api.patch(
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: {
            name: location.name,
            namespace: location.namespace,
            labels: { [INVENTORY_ID_LABEL]: location.id },
            annotations: { [INVENTORY_PROJECT_ANNOTATION]: projectId },
          },
          data: inventoryData(entries),
        } as KubernetesObject,
        undefined,
        undefined,
        this.#fieldManager,
        true,
        PatchStrategy.ServerSideApply,
      );
      return undefined;
    } catch (err) {
      return `cannot write the inventory ${location.namespace}/${location.name}: ${errorMessage(err)}`;
    }
  }

  /** Polls the applied objects until each is ready; resolves with those that are not (key -> why). */
  async #awaitReady(
    applied: Array<Planned & { status: ObjectStatus }>,
    timeoutMs: number,
    { signal, waitSignal }: ApplyRequest,
  ): Promise<Map<string, string>> {
    const deadline = Date.now() + timeoutMs;
    const stop = AbortSignal.any([signal, waitSignal].filter((s): s is AbortSignal => s !== undefined));
    const reasons = new Map<string, string>();
    let pending = applied;
    for (;;) {
      const still: typeof pending = [];
      for (const p of pending) {
        let why: string | undefined;
        try {
          const live = await this.#api.read({
            apiVersion: p.apiVersion,
            kind: p.kind,
            metadata: { name: p.name, ...(p.namespace && { namespace: p.namespace }) },
          });
          const r = readiness(p.group, live as never);
          if (!r.ready) {
            if (r.failed) {
              reasons.set(refKey(p), `failed: ${r.reason}`);
              continue;
            }
            why = r.reason;
          }
        } catch (err) {
          why = `cannot read it: ${errorMessage(err)}`;
        }
        if (why !== undefined) {
          reasons.set(refKey(p), why);
          still.push(p);
        } else {
          reasons.delete(refKey(p));
        }
      }
      pending = still;
      if (pending.length === 0) break;
      if (Date.now() >= deadline || stop.aborted) {
        const cut = stop.aborted ? "wait cut short" : `not ready within reconcile_timeout (${timeoutMs} ms)`;
        for (const p of pending) reasons.set(refKey(p), `${cut}: ${reasons.get(refKey(p))}`);
        break;
      }
      this.#onEvent({ type: "waiting", pending: pending.map(pick) });
      await sleep(Math.min(this.#pollMs, Math.max(0, deadline - Date.now())), undefined, {
        signal: stop,
      }).catch(() => {});
    }
    return reasons;
  }
}

function pick(r: ObjectRef): ObjectRef {
  return { group: r.group, kind: r.kind, namespace: r.namespace, name: r.name };
}
