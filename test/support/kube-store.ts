import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";

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
    labels?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface WatchEvent {
  type: WatchEventType;
  object: KubeObject;
  /** The store's resourceVersion after this change. */
  rv: number;
  resource: string;
}

/** The resources the test server knows: plural name -> kind and whether it lives in a namespace. */
export const RESOURCES = {
  namespaces: { kind: "Namespace", namespaced: false, apiVersion: "v1" },
  configmaps: { kind: "ConfigMap", namespaced: true, apiVersion: "v1" },
  pods: { kind: "Pod", namespaced: true, apiVersion: "v1" },
  leases: { kind: "Lease", namespaced: true, apiVersion: "coordination.k8s.io/v1" },
} as const;

export type Resource = keyof typeof RESOURCES;

export class StoreError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Objects with one resourceVersion counter for everything, as etcd gives the real server, and
 * the full change history so a watch can start from any version it was given.
 */
export class KubeStore extends EventEmitter<{ change: [WatchEvent] }> {
  readonly #objects = new Map<Resource, Map<string, KubeObject>>();
  readonly #history: WatchEvent[] = [];
  #rv = 1;

  constructor() {
    super();
    this.setMaxListeners(0);
    for (const r of Object.keys(RESOURCES) as Resource[]) this.#objects.set(r, new Map());
    for (const name of ["default", "kube-system"]) this.create("namespaces", undefined, namespace(name));
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  list(resource: Resource, ns: string | undefined): KubeObject[] {
    return [...this.#objects.get(resource)!.values()].filter(
      (o) => ns === undefined || o.metadata.namespace === ns,
    );
  }

  get(resource: Resource, ns: string | undefined, name: string): KubeObject {
    const found = this.#objects.get(resource)!.get(key(ns, name));
    if (!found) throw notFound(resource, name);
    return found;
  }

  create(resource: Resource, ns: string | undefined, body: unknown): KubeObject {
    const { kind, namespaced, apiVersion } = RESOURCES[resource];
    const input = body as Partial<KubeObject> | null;
    const name = input?.metadata?.name;
    if (typeof name !== "string" || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name)) {
      throw new StoreError(
        422,
        "Invalid",
        `${kind} "${String(name)}" is invalid: metadata.name: Invalid value`,
      );
    }
    if (namespaced && !this.#objects.get("namespaces")!.has(key(undefined, ns!))) {
      throw notFound("namespaces", ns!);
    }
    const objects = this.#objects.get(resource)!;
    if (objects.has(key(ns, name))) {
      throw new StoreError(409, "AlreadyExists", `${resource} "${name}" already exists`);
    }
    const object: KubeObject = {
      ...input,
      apiVersion,
      kind,
      metadata: {
        ...input!.metadata,
        name,
        ...(namespaced && { namespace: ns }),
        uid: randomUUID(),
        creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      },
    };
    if (resource === "namespaces") object.status = { phase: "Active" };
    objects.set(key(ns, name), object);
    this.#record(resource, "ADDED", object);
    return object;
  }

  /** Replaces the object's data (any top-level field but metadata); a MODIFIED event. */
  update(
    resource: Resource,
    ns: string | undefined,
    name: string,
    fields: Record<string, unknown>,
  ): KubeObject {
    const current = this.get(resource, ns, name);
    const object = { ...current, ...fields, metadata: { ...current.metadata } };
    this.#objects.get(resource)!.set(key(ns, name), object);
    this.#record(resource, "MODIFIED", object);
    return object;
  }

  /**
   * PUT: the whole object replaced (metadata the server owns kept). With optimistic concurrency, as
   * the real server: a `metadata.resourceVersion` that is not the current one is a 409 Conflict.
   */
  replace(resource: Resource, ns: string | undefined, name: string, body: unknown): KubeObject {
    const current = this.get(resource, ns, name);
    const input = (body ?? {}) as Partial<KubeObject>;
    const claimed = input.metadata?.resourceVersion;
    if (claimed !== undefined && claimed !== current.metadata.resourceVersion) {
      throw new StoreError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    const { uid, creationTimestamp, namespace } = current.metadata;
    const object: KubeObject = {
      ...input,
      apiVersion: current.apiVersion,
      kind: current.kind,
      metadata: { ...input.metadata, name, ...(namespace && { namespace }), uid, creationTimestamp },
    };
    this.#objects.get(resource)!.set(key(ns, name), object);
    this.#record(resource, "MODIFIED", object);
    return object;
  }

  delete(resource: Resource, ns: string | undefined, name: string): KubeObject {
    const object = this.get(resource, ns, name);
    this.#objects.get(resource)!.delete(key(ns, name));
    this.#record(resource, "DELETED", { ...object, metadata: { ...object.metadata } });
    return object;
  }

  /** Changes after `rv` to `resource` (in `ns` if set), oldest first. */
  since(resource: Resource, ns: string | undefined, rv: number): WatchEvent[] {
    return this.#history.filter((e) => e.rv > rv && matches(e, resource, ns));
  }

  #record(resource: Resource, type: WatchEventType, object: KubeObject): void {
    this.#rv++;
    object.metadata.resourceVersion = String(this.#rv);
    const event: WatchEvent = { type, object, rv: this.#rv, resource };
    this.#history.push(event);
    this.emit("change", event);
  }
}

export function matches(event: WatchEvent, resource: Resource, ns: string | undefined): boolean {
  return event.resource === resource && (ns === undefined || event.object.metadata.namespace === ns);
}

export function namespace(name: string): Partial<KubeObject> {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name } };
}

function key(ns: string | undefined, name: string): string {
  return ns === undefined ? name : `${ns}/${name}`;
}

function notFound(resource: string, name: string): StoreError {
  return new StoreError(404, "NotFound", `${resource} "${name}" not found`);
}
