// An informer over one custom resource in every namespace: client-node's ListWatch (list, then
// watch from the list's resourceVersion, resume after the watch ends, relist after 410 Gone), with
// a failed list or watch retried after a delay that doubles up to a bound.
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  Watch,
} from "@kubernetes/client-node";
import type { Logger } from "../../../tool/observability/index.ts";

export interface CustomKind {
  group: string;
  version: string;
  plural: string;
}

export interface InformerHandlers<T> {
  add(object: T): void;
  update(object: T): void;
  delete(object: T): void;
}

export interface InformerOptions {
  log: Logger;
  backoff: { initialMs: number; maxMs: number };
}

export class CustomInformer<T extends KubernetesObject> {
  readonly #lw: ListWatch<T>;
  readonly #kind: CustomKind;
  readonly #options: InformerOptions;
  #delay: number;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #listed = false;
  #markSynced!: () => void;
  /** Resolves once the first list is in the cache. */
  readonly synced = new Promise<void>((resolve) => {
    this.#markSynced = resolve;
  });

  constructor(kc: KubeConfig, kind: CustomKind, handlers: InformerHandlers<T>, options: InformerOptions) {
    this.#kind = kind;
    this.#options = options;
    this.#delay = options.backoff.initialMs;
    const api = kc.makeApiClient(CustomObjectsApi);
    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = (await api.listClusterCustomObject({ ...kind })) as KubernetesListObject<T>;
      this.#listed = true;
      this.#delay = options.backoff.initialMs;
      return result;
    };
    this.#lw = new ListWatch<T>(
      `/apis/${kind.group}/${kind.version}/${kind.plural}`,
      new Watch(kc),
      list,
      false,
    );
    this.#lw.on("add", (o) => handlers.add(o));
    this.#lw.on("update", (o) => handlers.update(o));
    this.#lw.on("delete", (o) => handlers.delete(o));
    this.#lw.on("error", (err: unknown) => this.#retryLater(err));
  }

  start(): void {
    void this.#lw.start().then(
      () => {
        if (this.#listed) this.#markSynced();
      },
      (err: unknown) => this.#retryLater(err),
    );
  }

  list(): readonly T[] {
    return this.#lw.list();
  }

  get(namespace: string, name: string): T | undefined {
    return this.#lw.get(name, namespace);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    void this.#lw.stop();
  }

  #retryLater(err: unknown): void {
    if (this.#stopped) return;
    const delay = this.#delay;
    this.#delay = Math.min(this.#delay * 2, this.#options.backoff.maxMs);
    this.#options.log.warn(
      {
        resource: `${this.#kind.plural}.${this.#kind.group}`,
        err: (err as Error)?.message ?? String(err),
        retryInMs: delay,
      },
      "flux: list or watch failed; retrying",
    );
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      if (!this.#stopped) this.start();
    }, delay);
  }
}
