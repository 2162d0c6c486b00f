// An informer as agentk's modules keep them: client-node's ListWatch (what `makeInformer` builds:
// list, then watch from the list's resourceVersion, resume after the watch ends, relist after 410
// Gone), with a failed list or watch retried after a delay that doubles up to a bound, and a
// promise for the first list.
import type { KubernetesListObject, KubernetesObject, Watch } from "@kubernetes/client-node";
import { ListWatch } from "@kubernetes/client-node";
import type { Logger } from "../../tool/observability/index.ts";

export interface InformerSource<T extends KubernetesObject> {
  /** The collection's path, e.g. `/api/v1/pods` or `/apis/g/v1/namespaces/ns/things`. */
  path: string;
  /** Reads the whole collection (the informer counts a list that returns as its first success). */
  list(): Promise<KubernetesListObject<T>>;
  /** client-node's Watch, or anything with its `watch` (ListWatch calls nothing else). */
  watch: Pick<Watch, "watch">;
  fieldSelector?: string;
  /** Names the collection in log lines. */
  resource: string;
}

export interface InformerHandlers<T> {
  add(object: T): void;
  update(object: T): void;
  delete(object: T): void;
}

export interface InformerOptions {
  log: Logger;
  /** Delays between retries after a failed list or watch. */
  backoff: { initialMs: number; maxMs: number };
}

export class RetryingInformer<T extends KubernetesObject> {
  readonly #lw: ListWatch<T>;
  readonly #resource: string;
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

  constructor(source: InformerSource<T>, handlers: InformerHandlers<T>, options: InformerOptions) {
    this.#resource = source.resource;
    this.#options = options;
    this.#delay = options.backoff.initialMs;
    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = await source.list();
      this.#listed = true;
      this.works();
      return result;
    };
    // ListWatch only calls `watch` of the Watch it is given. Its stop aborts the watch it holds,
    // but one it asks for after a list or while opening one under way at stop outlived it (held the
    // process open after shutdown): no watch begins once stopped, and one opened meanwhile is aborted.
    const watch: Pick<Watch, "watch"> = {
      watch: async (path, query, callback, done) => {
        if (this.#stopped) return new AbortController();
        const request = await source.watch.watch(path, query, callback, done);
        if (this.#stopped) request.abort();
        return request;
      },
    };
    this.#lw = new ListWatch<T>(source.path, watch as Watch, list, false, undefined, source.fieldSelector);
    this.#lw.on("add", (o) => handlers.add(o));
    this.#lw.on("update", (o) => handlers.update(o));
    this.#lw.on("delete", (o) => handlers.delete(o));
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

  /** The list or the watch works: the next failure waits the initial delay again. */
  works(): void {
    this.#delay = this.#options.backoff.initialMs;
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
      { resource: this.#resource, err: (err as Error)?.message ?? String(err), retryInMs: delay },
      "list or watch failed; retrying",
    );
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      if (!this.#stopped) this.start();
    }, delay);
  }
}
