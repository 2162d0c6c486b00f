// agentk, composed: the tunnel to kas, the services kas reaches over it, and the list of modules
// built from them. A new capability is a folder under modules/ whose agentk half joins
// `agentkModules`.
import {
  HandshakeError,
  TunnelClient,
  type TunnelClientOptions,
  type TunnelSession,
  tunnelClientChannel,
} from "../../lib/tunnel/index.ts";
import { agentConfigurationAgentModule } from "../../modules/agent_configuration/agentk/module.ts";
import { agentTrackerAgentModule } from "../../modules/agent_tracker/agentk/module.ts";
import {
  type ClusterViewsAgentOptions,
  clusterViewsAgentModule,
} from "../../modules/cluster_views/agentk/module.ts";
import { type FluxAgentOptions, fluxAgentModule } from "../../modules/flux/agentk/module.ts";
import { type GitopsAgentOptions, gitopsAgentModule } from "../../modules/gitops/agentk/module.ts";
import { agentkClientConfig } from "../../modules/kubernetes_api/agentk/kubeconfig.ts";
import { kubernetesApiAgentModule } from "../../modules/kubernetes_api/agentk/module.ts";
import { observabilityModule } from "../../modules/observability/module.ts";
import {
  type AgentConfiguration,
  type AgentkModuleDeps,
  type AgentkModuleFactory,
  LatestValue,
  LEADER_ONLY,
  ModuleRunner,
  Phase,
} from "../../modules/runtime/index.ts";
import type { LeaseElector } from "../../modules/runtime/lease-elector.ts";
import { serviceProxyAgentModule } from "../../modules/service_proxy/agentk/module.ts";
import { POD_NAME_HEADER, POD_NAMESPACE_HEADER } from "../../tool/agent-headers.ts";
import type { AgentkConfig } from "./config/index.ts";
import { createHttpServiceStreams } from "./http-services.ts";
import { createLeaseElector } from "./leader.ts";
import type { AgentkMetrics, Logger, ReadinessChecks } from "./observability/index.ts";

export { POD_NAME_HEADER, POD_NAMESPACE_HEADER } from "../../tool/agent-headers.ts";

/** GitOps timings a test may shorten. */
export type GitopsTuning = Pick<GitopsAgentOptions, "driftIntervalMs" | "pollIntervalMs" | "backoff">;

export interface AgentDeps {
  log: Logger;
  metrics: AgentkMetrics;
  readiness: ReadinessChecks;
  /**
   * For tests: faster reconnects, yamux settings, modules of the test's own after agentk's, GitOps
   * timings (a drift interval of seconds instead of minutes).
   */
  tuning?: Pick<TunnelClientOptions, "backoff" | "stableAfterMs" | "tunnel"> & {
    modules?: AgentkModuleFactory[];
    gitops?: GitopsTuning;
    /** Cluster views' coalescing and back-off. */
    clusterViews?: Omit<ClusterViewsAgentOptions, "kubeConfig">;
    /** How often agentk reads its cluster's version again (10 minutes in the daemon). */
    versionIntervalMs?: number;
    /** Flux's debounce and back-offs. */
    flux?: Omit<FluxAgentOptions, "kubeConfig">;
  };
}

export interface Agent {
  readonly client: TunnelClient;
  /** The agent configuration kas sent last (what the modules follow). */
  readonly configuration: LatestValue<AgentConfiguration>;
  /** Where the modules' listeners are (observability), once started. */
  readonly urls: Partial<Record<string, string>>;
  /** Builds and starts every module; the tunnel to kas is kept up (with backoff) until `close`. */
  start(): Promise<void>;
  /** GoAway to kas, in-flight streams get `graceMs` to finish, then everything closes. */
  close(graceMs: number): Promise<void>;
}

/** agentk's modules, in the order they are built; the runner starts them by phase. */
function agentkModules(
  config: AgentkConfig,
  kasConnection: AgentkModuleFactory,
  gitops: GitopsTuning = {},
  views: Omit<ClusterViewsAgentOptions, "kubeConfig"> = {},
  versionIntervalMs?: number,
  flux: Omit<FluxAgentOptions, "kubeConfig"> = {},
): AgentkModuleFactory[] {
  return [
    observabilityModule({ listen: config.observability.listen }),
    kasConnection,
    agentTrackerAgentModule({
      pod: config.pod,
      kubeConfig: () => agentkClientConfig(config.kubernetes),
      ...(versionIntervalMs !== undefined && { versionIntervalMs }),
    }),
    agentConfigurationAgentModule({ logLevel: config.logLevel }),
    kubernetesApiAgentModule(config.kubernetes),
    serviceProxyAgentModule(config.services),
    // Once per agent (leaderOnly): applies the manifest projects of the agent configuration.
    gitopsAgentModule({ ...gitops, kubeConfig: () => agentkClientConfig(config.kubernetes) }),
    // Once per agent (leaderOnly): informers, computed views pushed to kas.
    clusterViewsAgentModule({ ...views, kubeConfig: () => agentkClientConfig(config.kubernetes) }),
    // Once per agent (leaderOnly): Flux's GitRepositories reconciled at once after a push.
    fluxAgentModule({ ...flux, kubeConfig: () => agentkClientConfig(config.kubernetes) }),
  ];
}

export function createAgent(config: AgentkConfig, deps: AgentDeps): Agent {
  const { log, metrics, readiness } = deps;
  const httpServices = createHttpServiceStreams<TunnelSession>({
    log,
    metrics,
    drainingOf: (session) => session.drainingSignal,
  });
  const client = new TunnelClient({
    url: config.kasAddress,
    dial: {
      headers: {
        ...config.kasHeaders,
        ...(config.pod.name && { [POD_NAME_HEADER]: config.pod.name }),
        ...(config.pod.namespace && { [POD_NAMESPACE_HEADER]: config.pod.namespace }),
        authorization: `Bearer ${config.token.reveal()}`,
      },
      ...(config.caCertFile !== undefined && { caFile: config.caCertFile }),
      ...(config.kasTlsServerName !== undefined && { serverName: config.kasTlsServerName }),
      ...(config.kasInsecureSkipTlsVerify && { insecureSkipTlsVerify: true }),
    },
    tunnel: { keepAliveIntervalMs: config.keepAliveIntervalMs, ...deps.tuning?.tunnel },
    ...(deps.tuning?.backoff && { backoff: deps.tuning.backoff }),
    ...(deps.tuning?.stableAfterMs !== undefined && { stableAfterMs: deps.tuning.stableAfterMs }),
    // Never rejects: refusals and handler failures go to the log and metrics.
    onStream: (stream, session) => void httpServices.dispatcher.handle(stream, session),
  });
  // gRPC to kas: one HTTP/2 connection over a `grpc` stream on the active tunnel, moved to the
  // next tunnel when kas drains this one.
  const kasRpc = tunnelClientChannel(client, { label: "kas" });
  const modules = [
    ...agentkModules(
      config,
      kasConnectionModule(config, deps),
      deps.tuning?.gitops,
      deps.tuning?.clusterViews,
      deps.tuning?.versionIntervalMs,
      deps.tuning?.flux,
    ),
    ...(deps.tuning?.modules ?? []),
  ];
  const runner = new ModuleRunner<AgentkModuleDeps>(modules);
  let elector: LeaseElector | undefined;
  const moduleDeps: AgentkModuleDeps = {
    log,
    registry: metrics.registry,
    requests: metrics.requests,
    readiness,
    kas: client,
    httpServices,
    kasRpc,
    configuration: new LatestValue<AgentConfiguration>(),
  };
  return {
    client,
    configuration: moduleDeps.configuration,
    get urls() {
      return runner.urls;
    },
    async start() {
      // An election only for modules that asked for one (`leaderOnly`): no Lease otherwise.
      if (modules.some((m) => LEADER_ONLY in m)) {
        elector = await createLeaseElector(config, log);
        if (elector) moduleDeps.leader = elector;
        elector?.start();
      }
      await runner.start(moduleDeps);
    },
    async close(graceMs) {
      try {
        await runner.close(graceMs);
      } finally {
        await elector?.close(); // releases the lease: another replica takes over at once
      }
    },
  };

  /** The tunnel to kas, and the HTTP services served over it, as a module of the core phase. */
  function kasConnectionModule(c: AgentkConfig, d: AgentDeps): AgentkModuleFactory {
    return {
      name: "kas_connection",
      phase: Phase.core,
      create: () => ({
        name: "kas_connection",
        start() {
          watchConnection(client, c, d);
          client.start();
        },
        drain() {
          readiness.add("tunnel", () => {
            throw new Error("shutting down");
          });
        },
        async close(graceMs) {
          // Both at once: idle HTTP streams close at once, which lets the tunnels finish draining.
          kasRpc.close();
          await Promise.all([client.close(graceMs), httpServices.close(graceMs)]);
        },
      }),
    };
  }
}

/** Logs and metrics of the tunnel's life; readiness follows it. */
function watchConnection(
  client: TunnelClient,
  config: AgentkConfig,
  { log, metrics, readiness }: AgentDeps,
): void {
  client.on("connected", (session) => {
    metrics.tunnels.track(session);
    log.info({ kas: config.kasAddress, remote: session.stats.remoteAddress }, "connected to kas");
  });
  client.on("disconnected", (_session, err) => {
    if (err) log.warn({ kas: config.kasAddress, err: err.message }, "tunnel to kas closed");
    else log.info({ kas: config.kasAddress }, "tunnel to kas closed");
  });
  client.on("retry", ({ attempt, delayMs, reason, error, retryAfterMs, scheduled }) => {
    const status = error instanceof HandshakeError ? { status: error.status } : {};
    // kas's 429 names the limit it met in err; retryAfterMs is the wait it asked for (scheduled:
    // a place in a busy kas's queue, kept to without growing the backoff).
    const asked = retryAfterMs !== undefined ? { retryAfterMs, ...(scheduled && { scheduled }) } : {};
    log.warn(
      { kas: config.kasAddress, attempt, delayMs, reason, ...status, ...asked, err: error.message },
      reason === "dial" ? "cannot reach kas; retrying" : "tunnel to kas ended; reconnecting after a delay",
    );
  });
  readiness.add("tunnel", () => {
    if (!client.active) throw new Error("no tunnel to kas");
  });
}
