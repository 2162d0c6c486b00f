// GitLab's GitRepository controller: for each Flux GitRepository whose URL is on GitLab's host,
// agentk server-side-applies a webhook Receiver (annotated with the GitLab project it follows) and
// its Secret; a Receiver of ours that changes or goes is applied again. The Receivers' project
// annotations are the projects agentk asks kas to stream pushes of (`onProjects`), and a pushed
// project's Receivers are the webhooks to call (`receiversOf`).
import { type KubeConfig, KubernetesObjectApi, PatchStrategy } from "@kubernetes/client-node";
import type { Logger } from "../../../tool/observability/index.ts";
import type { RetryingInformer } from "../../runtime/informer.ts";
import { customInformer } from "./informer.ts";
import { gitlabProjectPath } from "./project-path.ts";
import {
  type GitRepository,
  NOTIFICATION_GROUP,
  owningRepository,
  PROJECT_ANNOTATION,
  type Receiver,
  receiver,
  receiverSecret,
  SOURCE_GROUP,
} from "./receiver-objects.ts";

/** agentk's field manager, as for everything it applies. */
export const FIELD_MANAGER = "agentk";

export interface FluxControllerOptions {
  /** GitLab's host: only GitRepository URLs on it are GitLab projects. */
  host: string;
  /** The agent's id, for the objects' annotations. */
  agentId: string;
  log: Logger;
  /** Delays before a failed apply (or list, or watch) is tried again. */
  backoff: { initialMs: number; maxMs: number };
  /** The projects the Receivers follow changed (sorted, unique). */
  onProjects(projects: string[]): void;
}

export class FluxController {
  readonly #repositories: RetryingInformer<GitRepository>;
  readonly #receivers: RetryingInformer<Receiver>;
  readonly #api: KubernetesObjectApi;
  readonly #o: FluxControllerOptions;
  /** GitRepositories to reconcile, `namespace/name`, in order of arrival. */
  readonly #queue = new Set<string>();
  readonly #retries = new Map<string, { timer: ReturnType<typeof setTimeout>; delayMs: number }>();
  #synced = false;
  #working = false;
  #stopped = false;
  #projects = "";

  constructor(kc: KubeConfig, options: FluxControllerOptions) {
    this.#o = options;
    this.#api = KubernetesObjectApi.makeApiClient(kc);
    const informer = { log: options.log, backoff: options.backoff };
    this.#repositories = customInformer<GitRepository>(
      kc,
      { group: SOURCE_GROUP, version: "v1", plural: "gitrepositories" },
      {
        add: (r) => this.#enqueue(r.metadata.namespace, r.metadata.name),
        update: (r) => this.#enqueue(r.metadata.namespace, r.metadata.name),
        delete: () => {}, // its Receiver and Secret go with it (owner references)
      },
      informer,
    );
    const receiverChanged = (r: Receiver) => {
      const owner = owningRepository(r);
      if (owner !== undefined) this.#enqueue(r.metadata.namespace, owner);
      this.#projectsChanged();
    };
    this.#receivers = customInformer<Receiver>(
      kc,
      { group: NOTIFICATION_GROUP, version: "v1", plural: "receivers" },
      { add: receiverChanged, update: receiverChanged, delete: receiverChanged },
      informer,
    );
  }

  start(): void {
    this.#repositories.start();
    this.#receivers.start();
    // As GitLab's: no work before both caches hold what the cluster has.
    void Promise.all([this.#repositories.synced, this.#receivers.synced]).then(() => {
      this.#synced = true;
      this.#projectsChanged();
      void this.#work();
    });
  }

  stop(): void {
    this.#stopped = true;
    this.#repositories.stop();
    this.#receivers.stop();
    for (const { timer } of this.#retries.values()) clearTimeout(timer);
    this.#retries.clear();
    this.#queue.clear();
  }

  /** The Receivers that follow `project` and have a webhook path (notification-controller set it). */
  receiversOf(project: string): { receiver: Receiver; webhookPath: string }[] {
    const out: { receiver: Receiver; webhookPath: string }[] = [];
    for (const r of this.#receivers.list()) {
      const path = r.status?.webhookPath;
      if (
        r.metadata.annotations?.[PROJECT_ANNOTATION] === project &&
        typeof path === "string" &&
        path !== ""
      ) {
        out.push({ receiver: r, webhookPath: path });
      }
    }
    return out;
  }

  #projectsChanged(): void {
    if (!this.#synced || this.#stopped) return;
    const projects = new Set<string>();
    for (const r of this.#receivers.list()) {
      const p = r.metadata.annotations?.[PROJECT_ANNOTATION];
      if (p) projects.add(p);
    }
    const sorted = [...projects].sort();
    const key = JSON.stringify(sorted);
    if (key === this.#projects) return;
    this.#projects = key;
    this.#o.onProjects(sorted);
  }

  #enqueue(namespace: string, name: string): void {
    if (this.#stopped) return;
    this.#queue.add(`${namespace}/${name}`);
    if (this.#synced) void this.#work();
  }

  async #work(): Promise<void> {
    if (this.#working) return;
    this.#working = true;
    try {
      while (!this.#stopped) {
        const key = this.#queue.values().next().value;
        if (key === undefined) break;
        this.#queue.delete(key);
        await this.#reconcile(key);
      }
    } finally {
      this.#working = false;
    }
  }

  async #reconcile(key: string): Promise<void> {
    const [namespace, name] = key.split("/") as [string, string];
    const repository = this.#repositories.get(namespace, name);
    if (!repository) return; // gone: so are its Receiver and Secret
    const url = typeof repository.spec?.url === "string" ? repository.spec.url : "";
    const project = gitlabProjectPath(url, this.#o.host);
    if (project === undefined) {
      this.#o.log.debug({ gitRepository: key, url }, "flux: GitRepository not on GitLab's host; left alone");
      return;
    }
    try {
      const secret = receiverSecret(this.#o.agentId, repository);
      await this.#apply(secret);
      await this.#apply(receiver(this.#o.agentId, repository, project, secret.metadata.name));
      this.#retries.delete(key);
      this.#o.log.debug({ gitRepository: key, project }, "flux: Receiver applied");
    } catch (err) {
      this.#retryLater(key, err);
    }
  }

  async #apply(object: Parameters<KubernetesObjectApi["patch"]>[0]): Promise<void> {
    await this.#api.patch(object, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }

  #retryLater(key: string, err: unknown): void {
    if (this.#stopped) return;
    const previous = this.#retries.get(key);
    const delayMs = previous
      ? Math.min(previous.delayMs * 2, this.#o.backoff.maxMs)
      : this.#o.backoff.initialMs;
    if (previous) clearTimeout(previous.timer);
    this.#o.log.warn(
      { gitRepository: key, err: (err as Error)?.message ?? String(err), retryInMs: delayMs },
      "flux: cannot apply the GitRepository's Receiver; retrying",
    );
    const timer = setTimeout(() => {
      const [namespace, name] = key.split("/") as [string, string];
      this.#enqueue(namespace, name);
    }, delayMs);
    this.#retries.set(key, { timer, delayMs });
  }
}
