import { randomBytes, randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { type FieldScope, recordUpdate, serverSideApply } from "./apply.ts";
import { jsonPatch, mergePatch, type PatchType, strategicMergePatch } from "./patch.ts";
import {
  type CustomResourceDefinition,
  groupVersion,
  ResourceRegistry,
  type ResourceType,
  resourceId,
} from "./resources.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";

/** A Kubernetes object as stored: what came in, plus the metadata the server owns. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { uid: string; kind?: string; name?: string }[];
    managedFields?: ManagedFieldsEntry[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export interface ManagedFieldsEntry {
  manager: string;
  operation: "Apply" | "Update";
  apiVersion: string;
  time: string;
  fieldsType: "FieldsV1";
  fieldsV1: Record<string, unknown>;
  subresource?: string;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface WatchEvent {
  type: WatchEventType;
  object: KubeObject;
  /** The store's resourceVersion after this change. */
  rv: number;
  /** The store's name of the resource: `pods`, `deployments.apps`, ... */
  resource: string;
  /** MODIFIED: the object before (a watch with a selector turns a change into ADDED or DELETED with it). */
  old?: KubeObject;
}

export interface StatusCause {
  type: string;
  message: string;
  field?: string;
}

export class StoreError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: { name?: string; group?: string; kind?: string; causes?: StatusCause[] },
  ) {
    super(message);
  }
}

export interface WriteOptions {
  /** `dryRun=All`: everything checked and computed, nothing stored, no event, no new resourceVersion. */
  dryRun?: boolean;
  /** Who made the change (recorded in `managedFields`). */
  fieldManager?: string;
  /** `status` when written through the status subresource. */
  subresource?: string;
}

export interface DeleteOptions {
  dryRun?: boolean;
  /** Dependents (by `ownerReferences`): deleted (Background, Foreground) or released (Orphan). */
  propagationPolicy?: "Background" | "Foreground" | "Orphan";
}

export interface ListOptions {
  labelSelector?: string | null;
  fieldSelector?: string | null;
}

/**
 * Hook run on every write before it is stored: `next` may be changed (the server-side apply
 * module records field ownership here). `prev` is undefined on create.
 */
export type WriteHook = (
  type: ResourceType,
  prev: KubeObject | undefined,
  next: KubeObject,
  options: WriteOptions & { operation: "Create" | "Update" | "Apply" },
) => void;

/**
 * Objects with one resourceVersion counter for everything, as etcd gives the real server, and a
 * bounded change history so a watch can start from a recent version (older ones are `410 Expired`).
 */
export class KubeStore extends EventEmitter<{ change: [WatchEvent] }> {
  readonly registry = new ResourceRegistry();
  readonly #objects = new Map<string, Map<string, KubeObject>>();
  readonly #history: WatchEvent[] = [];
  readonly #historyLimit: number;
  readonly #hooks: WriteHook[] = [];
  #rv = 1;
  /** The newest version no longer in the history (a watch from before it is Expired). */
  #compacted = 0;

  constructor(options: { historyLimit?: number } = {}) {
    super();
    this.setMaxListeners(0);
    this.#historyLimit = options.historyLimit ?? 1000;
    for (const name of ["default", "kube-system"]) {
      this.create("namespaces", undefined, { metadata: { name } });
    }
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  /** The oldest version a watch may start from. */
  get oldestResourceVersion(): number {
    return this.#compacted;
  }

  onWrite(hook: WriteHook): void {
    this.#hooks.push(hook);
  }

  type(resource: string): ResourceType {
    return this.registry.resolve(resource);
  }

  list(resource: string | ResourceType, ns: string | undefined, options: ListOptions = {}): KubeObject[] {
    const type = this.#type(resource);
    const labels = parseLabelSelector(options.labelSelector ?? null);
    const fields = parseFieldSelector(options.fieldSelector ?? null);
    return [...this.#table(type).values()]
      .filter((o) => ns === undefined || o.metadata.namespace === ns)
      .filter((o) => labels(o) && fields(o))
      .sort((a, b) =>
        `${a.metadata.namespace ?? ""}/${a.metadata.name}`.localeCompare(
          `${b.metadata.namespace ?? ""}/${b.metadata.name}`,
        ),
      )
      .map((o) => as(type, o));
  }

  get(resource: string | ResourceType, ns: string | undefined, name: string): KubeObject {
    const type = this.#type(resource);
    return as(type, this.#current(type, ns, name));
  }

  /** Whether the object exists. */
  has(resource: string | ResourceType, ns: string | undefined, name: string): boolean {
    const type = this.#type(resource);
    return this.#table(type).has(key(type.namespaced ? ns : undefined, name));
  }

  create(
    resource: string | ResourceType,
    ns: string | undefined,
    body: unknown,
    options: WriteOptions & { operation?: "Apply" } = {},
  ): KubeObject {
    const type = this.#type(resource);
    const input = (body ?? {}) as Partial<KubeObject>;
    checkKind(type, input);
    let name = input.metadata?.name;
    if (name === undefined && typeof input.metadata?.generateName === "string") {
      name = `${input.metadata.generateName}${randomBytes(3).toString("hex").slice(0, 5)}`;
    }
    if (typeof name !== "string" || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name) || name.length > 253) {
      throw new StoreError(
        422,
        "Invalid",
        `${type.kind} "${String(name ?? "")}" is invalid: metadata.name: Invalid value: ${JSON.stringify(name ?? "")}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'`,
        { name: String(name ?? ""), group: type.group, kind: type.kind },
      );
    }
    ns = this.#namespaceOf(type, ns, input);
    if (type.namespaced && !this.#table(this.type("namespaces")).has(ns!)) {
      throw new StoreError(404, "NotFound", `namespaces "${ns}" not found`, { name: ns, kind: "namespaces" });
    }
    if (this.#table(type).has(key(ns, name))) {
      throw new StoreError(409, "AlreadyExists", `${resourceId(type)} "${name}" already exists`, {
        name,
        group: type.group,
        kind: type.plural,
      });
    }
    if (type.plural === "customresourcedefinitions")
      checkCrd(input as unknown as CustomResourceDefinition, name);
    const object: KubeObject = {
      ...structuredClone(input),
      apiVersion: groupVersion(type),
      kind: type.kind,
      metadata: {
        ...structuredClone(input.metadata ?? {}),
        name,
        ...(type.namespaced && { namespace: ns }),
        uid: randomUUID(),
        creationTimestamp: now(),
        generation: 1,
      },
    };
    delete object.metadata.generateName;
    delete object.metadata.resourceVersion;
    delete object.metadata.deletionTimestamp;
    if (type.plural === "namespaces") object.status = { phase: "Active" };
    if (type.plural === "secrets" && !object.type) object.type = "Opaque";
    if (type.plural === "pods" && object.status === undefined) object.status = { phase: "Pending" };
    if (type.plural === "customresourcedefinitions") object.status = crdStatus(object);
    if (options.fieldManager !== undefined && options.operation !== "Apply") {
      object.metadata.managedFields = recordUpdate(
        undefined,
        object,
        options.fieldManager,
        scopeOf(type, options),
      );
    }
    this.#runHooks(type, undefined, object, { ...options, operation: options.operation ?? "Create" });
    if (options.dryRun) return as(type, object);
    this.#table(type).set(key(ns, name), object);
    this.#record(type, "ADDED", object);
    if (type.plural === "customresourcedefinitions") {
      this.registry.defineCustom(object as unknown as CustomResourceDefinition);
    }
    return as(type, object);
  }

  /**
   * Replaces the object's data (top-level fields given, `status` included), as a controller in a
   * test would; a MODIFIED event.
   */
  update(
    resource: string | ResourceType,
    ns: string | undefined,
    name: string,
    fields: Record<string, unknown>,
    options: WriteOptions = {},
  ): KubeObject {
    const type = this.#type(resource);
    const current = this.#current(type, ns, name);
    const next = { ...structuredClone(current), ...structuredClone(fields) };
    return this.#write(type, current, next, { ...options, everything: true });
  }

  /**
   * PUT: the whole object replaced (metadata the server owns kept). With optimistic concurrency, as
   * the real server: a `metadata.resourceVersion` that is not the current one is a 409 Conflict.
   */
  replace(
    resource: string | ResourceType,
    ns: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions = {},
  ): KubeObject {
    const type = this.#type(resource);
    const current = this.#current(type, ns, name);
    const input = structuredClone((body ?? {}) as Partial<KubeObject>);
    checkKind(type, input);
    if (input.metadata?.name !== undefined && input.metadata.name !== name) {
      throw new StoreError(400, "BadRequest", "the name of the object does not match the name on the URL");
    }
    this.#namespaceOf(type, ns, input);
    const claimed = input.metadata?.resourceVersion;
    if (claimed !== undefined && claimed !== "" && claimed !== current.metadata.resourceVersion) {
      throw conflict(type, name);
    }
    return this.#write(
      type,
      current,
      { ...input, metadata: { ...input.metadata, name } } as KubeObject,
      options,
    );
  }

  /**
   * Stores `next` as the new state of `current` (both complete objects): server-owned metadata
   * kept, status or the rest kept as the subresource demands, generation bumped on a spec change.
   */
  write(
    type: ResourceType,
    current: KubeObject,
    next: KubeObject,
    options: WriteOptions & { operation?: "Apply" } = {},
  ) {
    return this.#write(type, current, next, options);
  }

  #write(
    type: ResourceType,
    current: KubeObject,
    next: KubeObject,
    options: WriteOptions & { operation?: "Apply"; everything?: boolean },
  ): KubeObject {
    const { uid, creationTimestamp, namespace, name, generation, managedFields } = current.metadata;
    let object: KubeObject = {
      ...next,
      apiVersion: groupVersion(type),
      kind: type.kind,
      metadata: {
        ...next.metadata,
        name,
        ...(namespace !== undefined && { namespace }),
        uid,
        creationTimestamp,
        resourceVersion: current.metadata.resourceVersion,
        ...(managedFields && { managedFields }),
      },
    };
    if (options.everything) {
      // A test's own write (as a controller would make): spec and status alike.
    } else if (options.subresource === "status") {
      // Only status changes through the status subresource.
      object = { ...structuredClone(current), status: object.status };
      if (object.status === undefined) delete object.status;
    } else if (type.subresources.includes("status") && type.plural !== "customresourcedefinitions") {
      // ...and never through the main resource.
      if (current.status === undefined) delete object.status;
      else object.status = structuredClone(current.status);
    }
    if (type.plural === "customresourcedefinitions") {
      checkCrd(object as unknown as CustomResourceDefinition, name);
      object.status = crdStatus(object, current.status);
    }
    object.metadata.generation = specChanged(current, object) ? (generation ?? 0) + 1 : (generation ?? 1);
    if (options.operation === "Apply") {
      object.metadata.managedFields = next.metadata.managedFields;
    } else if (options.fieldManager !== undefined) {
      object.metadata.managedFields = recordUpdate(
        current,
        object,
        options.fieldManager,
        scopeOf(type, options),
      );
    }
    if (object.metadata.managedFields?.length === 0) delete object.metadata.managedFields;
    this.#runHooks(type, current, object, { ...options, operation: options.operation ?? "Update" });
    if (options.dryRun) return as(type, object);
    if (!contentChanged(current, object)) return as(type, current); // a no-op write: no new version
    this.#table(type).set(key(namespace, name), object);
    this.#record(type, "MODIFIED", object, current);
    if (type.plural === "customresourcedefinitions") {
      this.registry.defineCustom(object as unknown as CustomResourceDefinition);
    }
    return as(type, object);
  }

  /** PATCH: JSON patch, JSON merge patch, strategic merge patch, or server-side apply. */
  patch(
    resource: string | ResourceType,
    ns: string | undefined,
    name: string,
    patchType: PatchType,
    body: unknown,
    options: WriteOptions & { force?: boolean } = {},
  ): { object: KubeObject; created: boolean } {
    const type = this.#type(resource);
    if (patchType === "apply") return this.apply(type, ns, name, body, options);
    const current = this.#current(type, ns, name);
    let patched: unknown;
    if (patchType === "json") patched = jsonPatch(current, body);
    else if (patchType === "merge") patched = mergePatch(current, body);
    else if (type.custom) {
      throw new StoreError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
      );
    } else patched = strategicMergePatch(current, body);
    const next = patched as KubeObject;
    if (!next || typeof next !== "object" || typeof next.metadata !== "object") {
      throw new StoreError(422, "Invalid", "the patched object is not an object with metadata");
    }
    const claimed = next.metadata.resourceVersion;
    if (claimed !== undefined && claimed !== current.metadata.resourceVersion) throw conflict(type, name);
    if (next.metadata.name !== name) {
      throw new StoreError(
        422,
        "Invalid",
        `${type.kind} "${name}" is invalid: metadata.name: the name may not change`,
      );
    }
    return { object: this.#write(type, current, next, options), created: false };
  }

  /**
   * Server-side apply (`application/apply-patch+yaml`): creates the object or merges the
   * configuration into it, with field ownership per manager; a 409 Conflict naming the other
   * managers' fields it would change, unless `force`.
   */
  apply(
    resource: string | ResourceType,
    ns: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions & { force?: boolean } = {},
  ): { object: KubeObject; created: boolean } {
    const type = this.#type(resource);
    const manager = options.fieldManager;
    if (!manager) {
      throw new StoreError(
        400,
        "BadRequest",
        "PATCH requests with content type application/apply-patch+yaml require a fieldManager",
      );
    }
    const applied = structuredClone(body) as KubeObject;
    if (!applied || typeof applied !== "object" || !applied.apiVersion || !applied.kind) {
      throw new StoreError(400, "BadRequest", "an applied configuration must set apiVersion and kind");
    }
    if (applied.apiVersion !== groupVersion(type) || applied.kind !== type.kind) {
      throw new StoreError(
        400,
        "BadRequest",
        `the configuration is a ${applied.apiVersion}, Kind=${applied.kind}, not a ${groupVersion(type)}, Kind=${type.kind}`,
      );
    }
    applied.metadata = { ...(applied.metadata ?? {}), name: applied.metadata?.name ?? name };
    if (applied.metadata.name !== name) {
      throw new StoreError(400, "BadRequest", "the name of the object does not match the name on the URL");
    }
    this.#namespaceOf(type, ns, applied);
    if (options.subresource === "status") {
      for (const k of Object.keys(applied))
        if (!["apiVersion", "kind", "metadata", "status"].includes(k)) delete applied[k];
    } else if (type.subresources.includes("status") && type.plural !== "customresourcedefinitions") {
      delete applied.status;
    }
    const scope = scopeOf(type, options);
    const opts = { ...options, operation: "Apply" as const };
    if (!this.has(type, ns, name)) {
      if (options.subresource) throw this.#notFound(type, name);
      const object = serverSideApply(undefined, applied, manager, options.force ?? false, scope);
      delete object.metadata.resourceVersion;
      return { object: this.create(type, ns, object, opts), created: true };
    }
    const current = this.#current(type, ns, name);
    const claimed = applied.metadata.resourceVersion;
    if (claimed !== undefined && claimed !== current.metadata.resourceVersion) throw conflict(type, name);
    const next = serverSideApply(current, applied, manager, options.force ?? false, scope);
    return { object: this.#write(type, current, next, opts), created: false };
  }

  delete(
    resource: string | ResourceType,
    ns: string | undefined,
    name: string,
    options: DeleteOptions = {},
  ): KubeObject {
    const type = this.#type(resource);
    const object = this.#current(type, ns, name);
    if (options.dryRun) return as(type, object);
    const policy = options.propagationPolicy ?? "Background";
    const dependents = this.#dependents(object.metadata.uid!);
    if (policy === "Orphan") {
      for (const [t, o] of dependents) {
        const owners = (o.metadata.ownerReferences ?? []).filter((r) => r.uid !== object.metadata.uid);
        const next = structuredClone(o);
        if (owners.length > 0) next.metadata.ownerReferences = owners;
        else delete next.metadata.ownerReferences;
        this.#write(t, o, next, {});
      }
    }
    const cascade = () => {
      if (policy === "Orphan") return;
      for (const [t, o] of dependents) {
        if (this.#table(t).has(key(o.metadata.namespace, o.metadata.name))) {
          this.delete(t, o.metadata.namespace, o.metadata.name, { propagationPolicy: policy });
        }
      }
    };
    if (policy === "Foreground") cascade();
    // What lives inside goes with a namespace, and a CRD's objects with the CRD.
    if (type.plural === "namespaces") {
      for (const t of this.#servedOnce()) {
        if (!t.namespaced) continue;
        for (const o of [...this.#table(t).values()].filter((o) => o.metadata.namespace === name)) {
          this.delete(t, name, o.metadata.name, { propagationPolicy: "Background" });
        }
      }
    }
    if (type.plural === "customresourcedefinitions") {
      const crd = object as unknown as CustomResourceDefinition;
      const id = resourceId({ group: crd.spec.group, plural: crd.spec.names.plural });
      for (const o of [...(this.#objects.get(id)?.values() ?? [])]) {
        const t = this.registry.resolve(id);
        this.delete(t, o.metadata.namespace, o.metadata.name);
      }
      this.registry.removeCustom(crd.spec.group, crd.spec.names.plural);
      this.#objects.delete(id);
    }
    this.#table(type).delete(key(object.metadata.namespace, name));
    const gone = structuredClone(object);
    gone.metadata.deletionTimestamp = now();
    gone.metadata.deletionGracePeriodSeconds = 0;
    this.#record(type, "DELETED", gone);
    if (policy === "Background") cascade();
    return as(type, gone);
  }

  /**
   * Changes after `rv` to `resource` (in `ns` if set), oldest first. A version older than the
   * bounded history keeps is a 410 Expired, as etcd's compaction makes it on the real server.
   */
  since(resource: string | ResourceType, ns: string | undefined, rv: number): WatchEvent[] {
    const type = this.#type(resource);
    if (rv < this.#compacted) {
      throw new StoreError(410, "Expired", `too old resource version: ${rv} (${this.#compacted})`);
    }
    return this.#history
      .filter((e) => e.rv > rv && matches(e, type, ns))
      .map((e) => ({ ...e, object: as(type, e.object), ...(e.old && { old: as(type, e.old) }) }));
  }

  /**
   * Sets a Deployment's status as its controller would: `ready` true (every replica ready and
   * available, generation observed), false (none ready), or a number of ready replicas.
   */
  setDeploymentStatus(ns: string, name: string, ready: boolean | number): KubeObject {
    const type = this.type("deployments");
    const current = this.#current(type, ns, name);
    const spec = (current.spec ?? {}) as { replicas?: number };
    const replicas = spec.replicas ?? 1;
    const readyCount = ready === true ? replicas : ready === false ? 0 : ready;
    const available = readyCount >= replicas;
    const time = now();
    const condition = (type: string, status: boolean, reason: string, message: string) => ({
      type,
      status: status ? "True" : "False",
      lastUpdateTime: time,
      lastTransitionTime: time,
      reason,
      message,
    });
    const status = {
      observedGeneration: current.metadata.generation ?? 1,
      replicas,
      updatedReplicas: replicas,
      ...(readyCount > 0 && { readyReplicas: readyCount, availableReplicas: readyCount }),
      ...(readyCount < replicas && { unavailableReplicas: replicas - readyCount }),
      conditions: [
        available
          ? condition("Available", true, "MinimumReplicasAvailable", "Deployment has minimum availability.")
          : condition(
              "Available",
              false,
              "MinimumReplicasUnavailable",
              "Deployment does not have minimum availability.",
            ),
        available
          ? condition(
              "Progressing",
              true,
              "NewReplicaSetAvailable",
              `ReplicaSet "${name}" has successfully progressed.`,
            )
          : condition("Progressing", true, "ReplicaSetUpdated", `ReplicaSet "${name}" is progressing.`),
      ],
    };
    return this.#write(
      type,
      current,
      { ...structuredClone(current), status },
      {
        subresource: "status",
        fieldManager: "kube-controller-manager",
      },
    );
  }

  #runHooks(
    type: ResourceType,
    prev: KubeObject | undefined,
    next: KubeObject,
    options: Parameters<WriteHook>[3],
  ) {
    for (const hook of this.#hooks) hook(type, prev, next, options);
  }

  #dependents(uid: string): [ResourceType, KubeObject][] {
    const out: [ResourceType, KubeObject][] = [];
    for (const t of this.#servedOnce()) {
      for (const o of this.#table(t).values()) {
        if (o.metadata.ownerReferences?.some((r) => r.uid === uid)) out.push([t, o]);
      }
    }
    return out;
  }

  /** One type per stored resource (a CRD's several versions share their objects). */
  #servedOnce(): ResourceType[] {
    const seen = new Set<string>();
    return this.registry.all().filter((t) => {
      const id = resourceId(t);
      if (seen.has(id)) return false;
      seen.add(id);
      return true;
    });
  }

  #namespaceOf(type: ResourceType, ns: string | undefined, input: Partial<KubeObject>): string | undefined {
    if (!type.namespaced) return undefined;
    const claimed = input.metadata?.namespace;
    if (ns !== undefined && claimed !== undefined && claimed !== "" && claimed !== ns) {
      throw new StoreError(
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
    const result = ns ?? claimed;
    if (!result) throw new StoreError(400, "BadRequest", "a namespace is required for a namespaced resource");
    return result;
  }

  #type(resource: string | ResourceType): ResourceType {
    return typeof resource === "string" ? this.registry.resolve(resource) : resource;
  }

  #table(type: ResourceType): Map<string, KubeObject> {
    const id = resourceId(type);
    const table = this.#objects.get(id) ?? new Map<string, KubeObject>();
    this.#objects.set(id, table);
    return table;
  }

  #current(type: ResourceType, ns: string | undefined, name: string): KubeObject {
    const found = this.#table(type).get(key(type.namespaced ? ns : undefined, name));
    if (!found) throw this.#notFound(type, name);
    return found;
  }

  #notFound(type: ResourceType, name: string): StoreError {
    return new StoreError(404, "NotFound", `${resourceId(type)} "${name}" not found`, {
      name,
      group: type.group,
      kind: type.plural,
    });
  }

  #record(type: ResourceType, eventType: WatchEventType, object: KubeObject, old?: KubeObject): void {
    this.#rv++;
    object.metadata.resourceVersion = String(this.#rv);
    const event: WatchEvent = {
      type: eventType,
      object: structuredClone(object),
      rv: this.#rv,
      resource: resourceId(type),
      ...(old && { old: structuredClone(old) }),
    };
    this.#history.push(event);
    while (this.#history.length > this.#historyLimit) this.#compacted = this.#history.shift()!.rv;
    this.emit("change", event);
  }
}

function scopeOf(type: ResourceType, options: WriteOptions): FieldScope {
  return {
    custom: type.custom ?? false,
    statusSubresource: type.subresources.includes("status"),
    ...(options.subresource && { subresource: options.subresource }),
  };
}

/** A copy of a stored object as served at `type`'s version. */
function as(type: ResourceType, object: KubeObject): KubeObject {
  const copy = structuredClone(object);
  copy.apiVersion = groupVersion(type);
  return copy;
}

export function matches(event: WatchEvent, type: ResourceType | string, ns: string | undefined): boolean {
  const id = typeof type === "string" ? type : resourceId(type);
  return event.resource === id && (ns === undefined || event.object.metadata.namespace === ns);
}

export function namespace(name: string): Partial<KubeObject> {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name } };
}

function checkKind(type: ResourceType, input: Partial<KubeObject>) {
  if (input.kind !== undefined && input.kind !== "" && input.kind !== type.kind) {
    throw new StoreError(
      400,
      "BadRequest",
      `the kind in the data (${input.kind}) does not match the expected kind (${type.kind})`,
    );
  }
}

function checkCrd(crd: CustomResourceDefinition, name: string) {
  const spec = crd?.spec;
  if (
    !spec?.group ||
    !spec.names?.plural ||
    !spec.names.kind ||
    !Array.isArray(spec.versions) ||
    spec.versions.length === 0
  ) {
    throw new StoreError(
      422,
      "Invalid",
      `CustomResourceDefinition "${name}" is invalid: spec: Required value`,
    );
  }
  if (name !== `${spec.names.plural}.${spec.group}`) {
    throw new StoreError(
      422,
      "Invalid",
      `CustomResourceDefinition "${name}" is invalid: metadata.name: Invalid value: "${name}": must be spec.names.plural+"."+spec.group`,
    );
  }
}

/** A CRD's status; an unchanged condition keeps its `lastTransitionTime` from `previous`, as on the real server. */
function crdStatus(object: KubeObject, previous?: unknown) {
  const crd = object as unknown as CustomResourceDefinition;
  const before = (
    previous as { conditions?: { type?: string; status?: string; lastTransitionTime?: string }[] }
  )?.conditions;
  const time = before?.every((c) => c.status === "True" && c.lastTransitionTime)
    ? (before.find((c) => c.type === "Established")?.lastTransitionTime ?? now())
    : now();
  return {
    acceptedNames: crd.spec.names,
    storedVersions: crd.spec.versions
      .filter((v) => v.storage !== false)
      .map((v) => v.name)
      .slice(0, 1),
    conditions: [
      {
        type: "NamesAccepted",
        status: "True",
        reason: "NoConflicts",
        message: "no conflicts found",
        lastTransitionTime: time,
      },
      {
        type: "Established",
        status: "True",
        reason: "InitialNamesAccepted",
        message: "the initial names have been accepted",
        lastTransitionTime: time,
      },
    ],
  };
}

const IGNORED_FOR_GENERATION = new Set(["metadata", "status", "apiVersion", "kind"]);

function specChanged(a: KubeObject, b: KubeObject): boolean {
  const strip = (o: KubeObject) =>
    Object.fromEntries(Object.entries(o).filter(([k]) => !IGNORED_FOR_GENERATION.has(k)));
  return (
    !deepEqual(strip(a), strip(b)) || !deepEqual(a.metadata.deletionTimestamp, b.metadata.deletionTimestamp)
  );
}

function contentChanged(a: KubeObject, b: KubeObject): boolean {
  const strip = (o: KubeObject) => ({
    ...o,
    metadata: {
      ...o.metadata,
      resourceVersion: undefined,
      managedFields: stripTimes(o.metadata.managedFields),
    },
  });
  return !deepEqual(strip(a), strip(b));
}

function stripTimes(entries: ManagedFieldsEntry[] | undefined) {
  return entries?.map(({ time: _t, ...rest }) => rest);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => deepEqual(v, bb[i]));
  }
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return (
    ka.length === kb.length &&
    ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
}

export function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function key(ns: string | undefined, name: string): string {
  return ns === undefined ? name : `${ns}/${name}`;
}

function conflict(type: ResourceType, name: string): StoreError {
  return new StoreError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${resourceId(type)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    { name, group: type.group, kind: type.plural },
  );
}
