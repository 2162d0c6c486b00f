// Cluster views' agentk half: once per agent (leaderOnly), informers over the kinds the enabled
// views need (`cluster_views` of the agent configuration), views computed from their trimmed
// records, pushed to kas over the agent's gRPC channel (a snapshot per stream, then coalesced
// changes). A new configuration restarts the informers and sends a new snapshot.
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { KubeConfig } from "@kubernetes/client-node";
import { ClusterViewsServiceClient } from "../../../proto/gen/cluster_views/v1/cluster_views.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import {
  type AgentConfiguration,
  type AgentkModuleDeps,
  type AgentkModuleFactory,
  clusterModule,
  DEFAULT_STREAM_BACKOFF,
  type Module,
  type StreamBackoff,
} from "../../runtime/index.ts";
import type { ClusterViews, ViewName } from "../views.ts";
import { nodesView, podsView, warningsView, workloadsView } from "./compute.ts";
import { RESOURCES, RESOURCES_OF_VIEW, ResourceInformer, type ResourceName } from "./informers.ts";
import { type ClusterViewsAgentMetrics, createClusterViewsAgentMetrics } from "./metrics.ts";
import { SeqClock, ViewsPusher } from "./pusher.ts";
import type { NodeRecord, PodRecord, WarningRecord, WorkloadRecord } from "./records.ts";

export interface ClusterViewsAgentOptions {
  /** agentk's Kubernetes configuration; without one the module stays idle. */
  kubeConfig: () => Promise<KubeConfig | undefined>;
  /** Coalescing: changes go at most this often (the first after a quiet spell at once). Default 100 ms. */
  minIntervalMs?: number;
  /** Delays before a new stream after one ended. Default 250 ms doubling to 30 s. */
  backoff?: StreamBackoff;
  /** Delays before a failed list or watch is tried again. Default 1 s doubling to 30 s. */
  informerBackoff?: { initialMs: number; maxMs: number };
}

type Settings = NonNullable<AgentConfiguration["cluster_views"]>;

/** The module, as agentk lists it: once per agent and only with a cluster (see `clusterModule`), a fresh one each term of this replica's. */
export function clusterViewsAgentModule(options: ClusterViewsAgentOptions): AgentkModuleFactory {
  return clusterModule({
    name: "cluster_views",
    kubeConfig: options.kubeConfig,
    withoutCluster: "no Kubernetes configuration: no cluster views",
    create: (kc, deps) => createClusterViewsModule(kc, options, deps),
  });
}

async function createClusterViewsModule(
  kc: KubeConfig,
  options: ClusterViewsAgentOptions,
  { kasRpc, log, registry, configuration }: AgentkModuleDeps,
): Promise<Module> {
  const metrics = createClusterViewsAgentMetrics(registry);
  // The address and credentials are ignored: calls go over `kasRpc`, inside the tunnel.
  const client = new ClusterViewsServiceClient("kas", grpc.credentials.createInsecure(), {
    channelOverride: kasRpc,
  });
  const clock = new SeqClock();
  const epoch = randomUUID();
  let session: ViewsSession | undefined;
  let following: Promise<void> = Promise.resolve();
  const apply = (settings: Settings | undefined) => {
    const wanted = settings?.enabled ? settings : undefined;
    if (JSON.stringify(wanted) === JSON.stringify(session?.settings)) return;
    session?.stop();
    session = undefined;
    if (!wanted) {
      log.info("cluster views off in the agent configuration");
      return;
    }
    session = new ViewsSession(kc, wanted, {
      client,
      clock,
      epoch,
      log,
      metrics,
      minIntervalMs: options.minIntervalMs ?? 100,
      backoff: options.backoff ?? DEFAULT_STREAM_BACKOFF,
      informerBackoff: options.informerBackoff ?? { initialMs: 1000, maxMs: 30_000 },
    });
    session.start();
  };
  return {
    name: "cluster_views",
    start(signal) {
      following = (async () => {
        for await (const config of configuration.watch(signal)) apply(config.cluster_views);
      })().catch((err: unknown) => log.error({ err }, "following the configuration failed"));
      signal.addEventListener("abort", () => apply(undefined), { once: true });
    },
    async close() {
      apply(undefined);
      await following;
    },
    // No client.close(): it would close the channel, which is agentk's and shared by every module.
  };
}

interface SessionContext {
  client: ClusterViewsServiceClient;
  clock: SeqClock;
  epoch: string;
  log: Logger;
  metrics: ClusterViewsAgentMetrics;
  minIntervalMs: number;
  backoff: StreamBackoff;
  informerBackoff: { initialMs: number; maxMs: number };
}

/** Which views read each kind. */
const VIEWS_OF_RESOURCE = new Map<ResourceName, ViewName[]>();
for (const [view, resources] of Object.entries(RESOURCES_OF_VIEW) as [ViewName, ResourceName[]][]) {
  for (const r of resources) VIEWS_OF_RESOURCE.set(r, [...(VIEWS_OF_RESOURCE.get(r) ?? []), view]);
}

/** One configuration's informers and stream. */
class ViewsSession {
  readonly settings: Settings;
  readonly #informers = new Map<ResourceName, ResourceInformer[]>();
  readonly #pusher: ViewsPusher;
  readonly #stop = new AbortController();
  readonly #ctx: SessionContext;

  constructor(kc: KubeConfig, settings: Settings, ctx: SessionContext) {
    this.settings = settings;
    this.#ctx = ctx;
    const resources = new Set(settings.views.flatMap((v) => RESOURCES_OF_VIEW[v]));
    let pusher: ViewsPusher | undefined;
    for (const resource of resources) {
      const views = VIEWS_OF_RESOURCE.get(resource) ?? [];
      const hooks = {
        onChange: () => pusher?.changed(views),
        onRelist: () => ctx.metrics.relists.inc({ resource }),
        log: ctx.log,
        backoff: ctx.informerBackoff,
      };
      // Cluster-wide, or one watch per configured namespace (what a namespaced Role allows).
      const scopes =
        RESOURCES[resource].namespaced && settings.namespaces.length > 0 ? settings.namespaces : [undefined];
      this.#informers.set(
        resource,
        scopes.map((ns) => new ResourceInformer(kc, resource, ns, hooks)),
      );
    }
    const all = [...this.#informers.values()].flat();
    pusher = new ViewsPusher({
      client: ctx.client,
      views: settings.views,
      compute: (name) => this.#compute(name),
      synced: Promise.all(all.map((i) => i.synced)).then(() => {}),
      clock: ctx.clock,
      epoch: ctx.epoch,
      minIntervalMs: ctx.minIntervalMs,
      backoff: ctx.backoff,
      log: ctx.log,
      metrics: ctx.metrics,
    });
    this.#pusher = pusher;
  }

  start(): void {
    for (const list of this.#informers.values()) for (const i of list) i.start();
    void this.#pusher
      .run(this.#stop.signal)
      .catch((err: unknown) => this.#ctx.log.error({ err }, "views pusher failed"));
  }

  stop(): void {
    this.#stop.abort();
    this.#pusher.stop();
    for (const list of this.#informers.values()) for (const i of list) i.stop();
  }

  #records<R>(resource: ResourceName): R[] {
    const records = (this.#informers.get(resource) ?? []).flatMap((i) => i.list() as R[]);
    this.#ctx.metrics.objects.set({ resource }, records.length);
    return records;
  }

  #compute(name: ViewName): NonNullable<ClusterViews[ViewName]> {
    switch (name) {
      case "nodes":
        return nodesView(this.#records<NodeRecord>("nodes"));
      case "pods":
        return podsView(this.#records<PodRecord>("pods"), this.settings.namespaces);
      case "workloads":
        return workloadsView(
          (["deployments", "statefulsets", "daemonsets"] as const).flatMap((r) =>
            this.#records<WorkloadRecord>(r),
          ),
        );
      case "warnings":
        return warningsView(this.#records<WarningRecord>("events"));
    }
  }
}
