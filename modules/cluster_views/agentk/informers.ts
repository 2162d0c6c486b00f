// Informers over the kinds the enabled views need: client-node's ListWatch (what `makeInformer`
// builds: list, then watch from the list's resourceVersion, resume after the watch ends, relist
// after 410 Gone), with a Watch that trims each object to its record before the cache keeps it.
// Lists are read in pages and trimmed page by page. A failed list or watch is retried with backoff.
import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  KubernetesObjectApi,
  ListWatch,
  Watch,
} from "@kubernetes/client-node";
import type { Logger } from "../../../tool/observability/index.ts";
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
  readonly #lw: ListWatch<KubernetesObject>;
  readonly #hooks: InformerHooks;
  #lists = 0;
  #listed = false;
  #stopped = false;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #delay: number;
  #markSynced!: () => void;
  /** Resolves once the first list is in the cache. */
  readonly synced = new Promise<void>((resolve) => {
    this.#markSynced = resolve;
  });

  constructor(kc: KubeConfig, resource: ResourceName, namespace: string | undefined, hooks: InformerHooks) {
    this.resource = resource;
    this.#hooks = hooks;
    this.#delay = hooks.backoff.initialMs;
    const kind = RESOURCES[resource];
    const api = KubernetesObjectApi.makeApiClient(kc);
    const watch = new Watch(kc);
    const trimming = {
      watch: (
        path: string,
        query: Record<string, string | number | boolean | undefined>,
        callback: (phase: string, obj: KubernetesObject, raw: unknown) => void,
        done: (err: unknown) => void,
      ) =>
        watch.watch(
          path,
          query,
          (phase, obj, raw) => {
            // ERROR carries a Status (410 Gone is how the relist is asked for); BOOKMARK only a version.
            if (phase === "ERROR" || phase === "BOOKMARK") callback(phase, obj, raw);
            else {
              this.#delay = hooks.backoff.initialMs; // the watch works
              callback(phase, kind.trim(obj), undefined);
            }
          },
          done,
        ),
    };
    const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
      if (this.#lists++ > 0) hooks.onRelist();
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
      this.#listed = true;
      return { apiVersion: kind.apiVersion, kind: `${kind.kind}List`, metadata: { resourceVersion }, items };
    };
    // ListWatch only calls `watch` of what it is given: the trimming one stands in for Watch.
    this.#lw = new ListWatch(
      pathOf(kind, resource, namespace),
      trimming as unknown as Watch,
      list,
      false,
      undefined,
      kind.fieldSelector,
    );
    const changed = () => hooks.onChange();
    this.#lw.on("add", changed);
    this.#lw.on("update", changed);
    this.#lw.on("delete", changed);
    this.#lw.on("error", (err: unknown) => this.#retryLater(err));
  }

  start(): void {
    // Resolves once the list is in the cache and the watch is asked for (a failed list: not synced).
    void this.#lw.start().then(
      () => {
        if (this.#listed) this.#markSynced();
      },
      (err: unknown) => this.#retryLater(err),
    );
  }

  #retryLater(err: unknown): void {
    if (this.#stopped) return;
    const delay = this.#delay;
    this.#delay = Math.min(this.#delay * 2, this.#hooks.backoff.maxMs);
    this.#hooks.log.warn(
      { resource: this.resource, err: (err as Error)?.message ?? String(err), retryInMs: delay },
      "list or watch failed; retrying",
    );
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      if (!this.#stopped) this.start();
    }, delay);
  }

  list(): R[] {
    return this.#lw.list() as R[];
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    void this.#lw.stop();
  }
}
