import type { ResourceType } from "./resources.ts";
import type { KubeObject } from "./store.ts";

/** What the client asked a response to be: the object(s) as they are, or a `meta.k8s.io` Table. */
export function wantsTable(accept: string | undefined): boolean {
  return (accept ?? "").split(",").some((part) => {
    const params = part.split(";").map((p) => p.trim());
    return params.includes("as=Table") && params.includes("g=meta.k8s.io");
  });
}

interface Column {
  name: string;
  type: string;
  format?: string;
  description: string;
  priority?: number;
  cell: (o: KubeObject) => string | number;
}

type Any = Record<string, unknown> & { [k: string]: Any | undefined };
const at = (o: KubeObject, path: string): unknown => {
  let v: unknown = o;
  for (const part of path.split(".")) v = (v as Any | undefined)?.[part];
  return v;
};
const num = (o: KubeObject, path: string) => Number(at(o, path) ?? 0);

const NAME: Column = {
  name: "Name",
  type: "string",
  format: "name",
  description: "Name must be unique within a namespace.",
  cell: (o) => o.metadata.name,
};
const AGE: Column = {
  name: "Age",
  type: "string",
  description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
  cell: (o) => age(o.metadata.creationTimestamp),
};

function column(name: string, description: string, cell: Column["cell"], type = "string"): Column {
  return { name, type, description, cell };
}

const KIND_COLUMNS: Record<string, Column[]> = {
  Namespace: [column("Status", "The status of the namespace", (o) => String(at(o, "status.phase") ?? ""))],
  ConfigMap: [
    column(
      "Data",
      "Number of data entries",
      (o) =>
        Object.keys((o.data as object) ?? {}).length + Object.keys((o.binaryData as object) ?? {}).length,
      "integer",
    ),
  ],
  Secret: [
    column("Type", "The type of the secret", (o) => String(o.type ?? "Opaque")),
    column("Data", "Number of data entries", (o) => Object.keys((o.data as object) ?? {}).length, "integer"),
  ],
  Pod: [
    column("Ready", "The aggregate readiness state of this pod for accepting traffic.", (o) => {
      const containers = (at(o, "spec.containers") as unknown[] | undefined) ?? [];
      const statuses = (at(o, "status.containerStatuses") as { ready?: boolean }[] | undefined) ?? [];
      return `${statuses.filter((s) => s.ready).length}/${containers.length}`;
    }),
    column("Status", "The aggregate status of the containers in this pod.", (o) =>
      String(at(o, "status.phase") ?? "Pending"),
    ),
    column(
      "Restarts",
      "The number of times the containers in this pod have been restarted.",
      (o) =>
        ((at(o, "status.containerStatuses") as { restartCount?: number }[] | undefined) ?? []).reduce(
          (n, s) => n + (s.restartCount ?? 0),
          0,
        ),
      "integer",
    ),
  ],
  Deployment: [
    column(
      "Ready",
      "Number of the pod with ready state",
      (o) => `${num(o, "status.readyReplicas")}/${at(o, "spec.replicas") ?? 1}`,
    ),
    column(
      "Up-to-date",
      "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
      (o) => num(o, "status.updatedReplicas"),
      "integer",
    ),
    column(
      "Available",
      "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
      (o) => num(o, "status.availableReplicas"),
      "integer",
    ),
  ],
  StatefulSet: [
    column(
      "Ready",
      "Number of the pod with ready state",
      (o) => `${num(o, "status.readyReplicas")}/${at(o, "spec.replicas") ?? 1}`,
    ),
  ],
  ReplicaSet: [
    column("Desired", "Number of desired pods.", (o) => Number(at(o, "spec.replicas") ?? 1), "integer"),
    column("Current", "Number of actual replicas.", (o) => num(o, "status.replicas"), "integer"),
    column("Ready", "Number of ready replicas.", (o) => num(o, "status.readyReplicas"), "integer"),
  ],
  DaemonSet: [
    column(
      "Desired",
      "The total number of nodes that should be running the daemon pod.",
      (o) => num(o, "status.desiredNumberScheduled"),
      "integer",
    ),
    column(
      "Ready",
      "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
      (o) => num(o, "status.numberReady"),
      "integer",
    ),
  ],
  Service: [
    column("Type", "The type of the service.", (o) => String(at(o, "spec.type") ?? "ClusterIP")),
    column("Cluster-IP", "The cluster IP of the service.", (o) =>
      String(at(o, "spec.clusterIP") ?? "<none>"),
    ),
  ],
  Node: [
    column("Status", "The status of the node", (o) => {
      const ready = (
        (at(o, "status.conditions") as { type: string; status: string }[] | undefined) ?? []
      ).find((c) => c.type === "Ready");
      return ready?.status === "True" ? "Ready" : "NotReady";
    }),
  ],
  ServiceAccount: [],
  Event: [
    column("Type", "Type of this event.", (o) => String(o.type ?? "")),
    column("Reason", "Reason why the action was taken.", (o) => String(o.reason ?? "")),
    column("Message", "A human-readable description of the status of this operation.", (o) =>
      String(o.message ?? ""),
    ),
  ],
  CustomResourceDefinition: [
    column(
      "Created At",
      "When the definition was created",
      (o) => o.metadata.creationTimestamp ?? "",
      "date",
    ),
  ],
};

function columnsOf(type: ResourceType): Column[] {
  if (type.kind === "CustomResourceDefinition") return [NAME, ...KIND_COLUMNS[type.kind]!];
  return [NAME, ...(type.custom ? [] : (KIND_COLUMNS[type.kind] ?? [])), AGE];
}

/**
 * The `meta.k8s.io/v1` Table the real server answers `kubectl get` with. `includeObject` as the
 * API takes it: None, Metadata (the default: a PartialObjectMetadata per row) or Object.
 */
export function toTable(
  type: ResourceType,
  objects: KubeObject[],
  resourceVersion: string | undefined,
  includeObject: string | null,
  withColumns = true,
) {
  const columns = columnsOf(type);
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { ...(resourceVersion !== undefined && { resourceVersion }) },
    columnDefinitions: withColumns
      ? columns.map(({ name, type, format, description, priority }) => ({
          name,
          type,
          format: format ?? "",
          description,
          priority: priority ?? 0,
        }))
      : [],
    rows: objects.map((o) => ({
      cells: columns.map((c) => c.cell(o)),
      object:
        includeObject === "None"
          ? undefined
          : includeObject === "Object"
            ? o
            : { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata },
    })),
  };
}

/** `5s`, `3m12s`, `2d4h`: how kubectl shows an age. */
export function age(timestamp: string | undefined): string {
  if (!timestamp) return "<unknown>";
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(timestamp)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}
