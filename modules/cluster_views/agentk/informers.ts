// Informers over the kinds the enabled views need: client-node's ListWatch (what `makeInformer`
// builds: list, then watch from the list's resourceVersion, resume after the watch ends, relist
// after 410 Gone; the runtime's retrying informer), with a Watch that trims each object to its
// record before the cache keeps it. Lists are read in pages and trimmed page by page.
import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  KubernetesObjectApi,
  Watch,
} from "@kubernetes/client-node";
import type { Logger } from "../../../tool/observability/index.ts";
import { RetryingInformer } from "../../runtime/informer.ts";
import type { ViewName } from "../views.ts";
import { nodeRecord, podRecord, warningRecord, workloadRecord } from "./records.ts";

export type ResourceName = "nodes" | "pods" | "deployments" | "statefulsets" | "daemonsets" | "events";

interface ResourceKind {
  apiVersion: string;
  kind: string;
  group: string;
  namespaced: boolean;
  fieldSelector?: string;
  // biome-ignore lint/suspicious/noExplicitAny: raw Kubernetes objects
  trim(o: any): KubernetesObject;
}

export const RESOURCES: Record<ResourceName, ResourceKind> = {
  nodes: { apiVersion: "v1", kind: "Node", group: "", namespaced: false, trim: nodeRecord },
  pods: { apiVersion: "v1", kind: "Pod", group: "", namespaced: true, trim: podRecord },
  deployments: {
    apiVersion: "apps/v1",
    kind: "Deployment",
    group: "apps",
    namespaced: true,
    trim: (o) => workloadRecord("Deployment", o),
  },
  statefulsets: {
    apiVersion: "apps/v1",
    kind: "StatefulSet",
    group: "apps",
    namespaced: true,
    trim: (o) => workloadRecord("StatefulSet", o),
  },
  daemonsets: {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    group: "apps",
    namespaced: true,
    trim: (o) => workloadRecord("DaemonSet", o),
  },
  // Only Warning events are kept (a field selector the API server applies).
  events: {
    apiVersion: "v1",
    kind: "Event",
    group: "",
    namespaced: true,
    fieldSelector: "type=Warning",
    trim: warningRecord,
  },
};

/** Which kinds each view reads. */
export const RESOURCES_OF_VIEW: Record<ViewName, readonly ResourceName[]> = {
  nodes: ["nodes"],
  pods: ["pods"],
  workloads: ["deployments", "statefulsets", "daemonsets"],
  warnings: ["events"],
};

/** Objects per list page: a relist of a big cluster never holds more than one page untrimmed. */
export const LIST_PAGE = 500;

export interface InformerHooks {
  /** An object of this informer was added, changed or deleted (or a relist replaced them). */
  onChange(): void;
  /** A list was read again (after 410 Gone or an error), not the first one. */
  onRelist(): void;
  log: Logger;
  /** Delays between retries after a failed list or watch. */
  backoff: { initialMs: number; maxMs: number };
}

function pathOf(kind: ResourceKind, resource: ResourceName, namespace: string | undefined): string {
  const base = kind.group === "" ? "/api/v1" : `/apis/${kind.apiVersion}`;
  return namespace === undefined ? `${base}/${resource}` : `${base}/namespaces/${namespace}/${resource}`;
}

/** One kind, in one namespace or in all: the records client-node's cache keeps, kept up to date. */
export class ResourceInformer<R extends KubernetesObject = KubernetesObject> {
  readonly resource: ResourceName;
  readonly #informer: RetryingInformer<KubernetesObject>;
  readonly synced: Promise<void>;

  constructor(kc: KubeConfig, resource: ResourceName, namespace: string | undefined, hooks: InformerHooks) {
    this.resource = resource;
    const kind = RESOURCES[resource];
    const api = KubernetesObjectApi.makeApiClient(kc);
    const watch = new Watch(kc);
    let lists = 0;
    const trimming: Pick<Watch, "watch"> = {
      watch: (path, query, callback, done) =>
        watch.watch(
          path,
          query,
          (phase, obj, raw) => {
            // ERROR carries a Status (410 Gone is how the relist is asked for); BOOKMARK only a version.
            if (phase === "ERROR" || phase === "BOOKMARK") callback(phase, obj, raw);
            else {
              this.#informer.works();
              callback(phase, kind.trim(obj), undefined);
            }
          },
          done,
        ),
    };
    const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
      if (lists++ > 0) hooks.onRelist();
      const items: KubernetesObject[] = [];
      let token: string | undefined;
      let resourceVersion = "";
      do {
        const page = await api.list(
          kind.apiVersion,
          kind.kind,
          namespace,
          undefined,
          undefined,
          undefined,
          kind.fieldSelector,
          undefined,
          LIST_PAGE,
          token,
        );
        for (const o of page.items) items.push(kind.trim(o));
        const meta = (page.metadata ?? {}) as {
          _continue?: string;
          continue?: string;
          resourceVersion?: string;
        };
        token = meta._continue || meta.continue || undefined;
        resourceVersion = meta.resourceVersion ?? "";
      } while (token);
      return { apiVersion: kind.apiVersion, kind: `${kind.kind}List`, metadata: { resourceVersion }, items };
    };
    const changed = () => hooks.onChange();
    this.#informer = new RetryingInformer(
      {
        path: pathOf(kind, resource, namespace),
        list,
        watch: trimming,
        ...(kind.fieldSelector === undefined ? {} : { fieldSelector: kind.fieldSelector }),
        resource,
      },
      { add: changed, update: changed, delete: changed },
      hooks,
    );
    this.synced = this.#informer.synced;
  }

  start(): void {
    this.#informer.start();
  }

  list(): R[] {
    return this.#informer.list() as R[];
  }

  stop(): void {
    this.#informer.stop();
  }
}
