// kas, composed: the shared dependencies (parts.ts), and the list of modules built from them,
// started and stopped by the lifecycle (lifecycle.ts). main.ts runs it as a process; tests run it
// in-process. A new capability is a folder under modules/ whose kas half joins the list in `kasModules`.
import type { Router, RouterOptions } from "../../lib/router/index.ts";
import { kindName } from "../../lib/tunnel/header/index.ts";
import { StreamDispatcher, type TunnelOptions } from "../../lib/tunnel/index.ts";
import { agentConfigurationModule } from "../../modules/agent_configuration/kas/module.ts";
import { agentTrackerModule } from "../../modules/agent_tracker/kas/module.ts";
import type { AgentTracker } from "../../modules/agent_tracker/kas/tracker.ts";
import { actionCableModule } from "../../modules/cluster_views/kas/actioncable-module.ts";
import { type ClusterViewsKasOptions, clusterViewsModule } from "../../modules/cluster_views/kas/module.ts";
import type { ViewsHub } from "../../modules/cluster_views/views.ts";
import { dashboardModule } from "../../modules/dashboard/kas/module.ts";
import { fluxModule } from "../../modules/flux/kas/module.ts";
import { gitopsModule } from "../../modules/gitops/kas/module.ts";
import { kasDataDir } from "../../modules/kubernetes_api/kas/listener-tls.ts";
import { kubernetesApiModule } from "../../modules/kubernetes_api/kas/module.ts";
import { observabilityModule } from "../../modules/observability/module.ts";
import type { AgentSession, KasModuleDeps, KasModuleFactory } from "../../modules/runtime/index.ts";
import { AgentConfigurations, ModuleRunner } from "../../modules/runtime/index.ts";
import { serviceProxyModule } from "../../modules/service_proxy/kas/module.ts";
import { usageMetricsKas } from "../../modules/usage_metrics/kas/module.ts";
import { type AgentRpcServer, createAgentRpcServer } from "./agent-rpc.ts";
import type { AgentListener } from "./agents/index.ts";
import { ApiRouteTable, createGitLabRpcServer, type GitLabRpcServer } from "./api/index.ts";
import { createAgentAuthenticate } from "./auth/index.ts";
import type { KasConfig, KasSecrets } from "./config/index.ts";
import { agentListenerModule, agentRpcModule, apiFrontModule } from "./core-modules.ts";
import { KasLifecycle, type KasPublished } from "./lifecycle.ts";
import { createKasMetrics, type KasMetrics, type Logger, ReadinessChecks } from "./observability/index.ts";
import { type KasParts, openKasParts } from "./parts.ts";

export interface KasServerOptions {
  config: KasConfig;
  secrets: KasSecrets;
  log: Logger;
  /** Default: a fresh registry with kas's metrics. */
  metrics?: KasMetrics;
  /** For tests: faster Redis timings, yamux settings. */
  tuning?: {
    redis?: Partial<NonNullable<RouterOptions["redis"]>>;
    tunnel?: TunnelOptions;
    dashboard?: { heartbeatMs?: number };
    clusterViews?: Omit<ClusterViewsKasOptions, "onHub">;
  };
}

/** Where each listener ended up (ports may be ephemeral in tests). */
export interface KasAddresses {
  agent: string;
  observability: string;
  kubernetesApi: string;
  /** Absent without api.listen.authentication_secret_file. */
  api?: string;
  /** Absent in single-replica mode (no Redis). */
  privateApi?: string;
  /** Absent without dashboard.listen.address. */
  dashboard?: string;
}

export interface KasServer {
  readonly metrics: KasMetrics;
  /** Where modules register the stream kinds agents open (before `start`). */
  readonly agentStreams: StreamDispatcher<AgentSession>;
  readonly readiness: ReadinessChecks;
  /** Set once started. */
  readonly router: Router | undefined;
  readonly agents: AgentListener | undefined;
  readonly tracker: AgentTracker | undefined;
  /** The agents' cluster views (once started). */
  readonly views: ViewsHub | undefined;
  /** Builds and starts every module; on failure, whatever started is stopped again. */
  start(): Promise<KasAddresses>;
  /**
   * Graceful stop: not ready, GoAway to every tunnel, no new requests, what is in flight gets
   * `graceMs` (default shutdown_grace_period) to finish, unregistered from Redis.
   */
  close(graceMs?: number): Promise<void>;
}

export function createKasServer(options: KasServerOptions): KasServer {
  const metrics = options.metrics ?? createKasMetrics();
  const readiness = new ReadinessChecks();
  const agentStreams = createAgentStreams(options.log, metrics);
  const base = { ...options, metrics, readiness, agentStreams };
  const lifecycle = new KasLifecycle({
    config: options.config,
    readiness,
    open: () => openKasParts({ ...base, redisOverrides: options.tuning?.redis }),
    compose: (parts, published) => composeKas(base, parts, published),
  });
  return {
    metrics,
    readiness,
    agentStreams,
    get router() {
      return lifecycle.running?.parts.router;
    },
    get agents() {
      return lifecycle.running?.published.agents;
    },
    get tracker() {
      return lifecycle.running?.published.tracker;
    },
    get views() {
      return lifecycle.running?.published.views;
    },
    async start() {
      const { runner, parts } = await lifecycle.start();
      const urls = runner.urls;
      return {
        agent: urls.agent!,
        observability: urls.observability!,
        kubernetesApi: urls.kubernetesApi!,
        ...(urls.api && { api: urls.api }),
        ...(urls.dashboard && { dashboard: urls.dashboard }),
        ...(parts.router.clustered && { privateApi: parts.router.privateUrl }),
      };
    },
    close: (graceMs) => lifecycle.close(graceMs),
  };
}

/** What every part of kas is built with: the options, and what exists before `start`. */
type KasBase = KasServerOptions & {
  metrics: KasMetrics;
  readiness: ReadinessChecks;
  agentStreams: StreamDispatcher<AgentSession>;
};

/** Where modules register the stream kinds agents open; refusals logged, handler failures counted. */
function createAgentStreams(log: Logger, metrics: KasMetrics): StreamDispatcher<AgentSession> {
  return new StreamDispatcher<AgentSession>({
    onReject: (err, session) =>
      log.info({ agentId: session.identity.agentId, reason: err.message }, "agent stream refused"),
    // A handler failing after it accepted a stream is a bug or a lost dependency: never silent.
    onHandlerError: (err, header, session) => {
      const kind = kindName(header.kind);
      log.error({ err, agentId: session.identity.agentId, kind }, "agent stream handler failed");
      metrics.agentStreamFailures.inc({ kind });
    },
  });
}

/** The gRPC servers and route table the fronts serve, which modules fill. */
interface KasFronts {
  api: ApiRouteTable;
  /** Absent without the API's secret. */
  gitlabRpc: GitLabRpcServer | undefined;
  agentRpc: AgentRpcServer;
}

function createFronts({ config, secrets, readiness, log, metrics }: KasBase): KasFronts {
  const gitlabRpc =
    secrets.apiSecret &&
    createGitLabRpcServer({
      secret: secrets.apiSecret,
      readiness,
      log,
      metrics: metrics.requests,
      limits: config.connectionLimits,
      maxConnectionAgeMs: config.api.listen.maxConnectionAgeMs,
    });
  return {
    api: new ApiRouteTable(),
    gitlabRpc: gitlabRpc || undefined,
    // Calls on a draining tunnel end within half its grace, so they end with their own status.
    agentRpc: createAgentRpcServer(config.shutdownGracePeriodMs / 2),
  };
}

/** The modules' runner over the parts, and the dependencies each module is built from. */
function composeKas(
  base: KasBase,
  parts: KasParts,
  published: KasPublished,
): { runner: ModuleRunner<KasModuleDeps>; deps: KasModuleDeps } {
  const { config, log, metrics } = base;
  const fronts = createFronts(base);
  const usage = usageMetricsKas({ periodMs: config.observability.usageReportingPeriodMs }, metrics.registry);
  const runner = new ModuleRunner(kasModules(base, parts, fronts, published, usage.module));
  const deps: KasModuleDeps = {
    log,
    registry: metrics.registry,
    requests: metrics.requests,
    readiness: base.readiness,
    router: parts.router,
    agentHttp: parts.agentHttp,
    agentStreams: base.agentStreams,
    agentRpc: fronts.agentRpc,
    api: fronts.api,
    // Without the API's secret nothing serves them; modules add their services all the same.
    gitlabRpc: fronts.gitlabRpc ?? { addService: () => {} },
    repositories: parts.repositories,
    projects: parts.projects,
    broadcast: parts.shared.broadcast,
    configurations: new AgentConfigurations(),
    connectionLimits: config.connectionLimits,
    usage: usage.tracker,
    ...(parts.shared.redis && { redis: parts.shared.redis }),
    ...(parts.gitlab && { gitlab: parts.gitlab }),
  };
  return { runner, deps };
}

/** kas's modules, in order: the core, then each capability (a new one joins this list). */
function kasModules(
  { config, secrets, log, metrics, tuning }: KasBase,
  parts: KasParts,
  { api, gitlabRpc, agentRpc }: KasFronts,
  published: KasPublished,
  usageMetrics: KasModuleFactory,
): KasModuleFactory[] {
  const { admission, authenticator, tokenRecheck, proxyAccess } = parts;
  return [
    observabilityModule({
      listen: config.observability.listen.address,
      limits: config.connectionLimits,
      paths: {
        metrics: config.observability.prometheus.urlPath,
        liveness: config.observability.livenessProbe.urlPath,
        readiness: config.observability.readinessProbe.urlPath,
      },
    }),
    agentListenerModule({
      config,
      metrics,
      authenticate: admission.wrap(
        createAgentAuthenticate({
          authenticator,
          log,
          onResult: (result) => metrics.agentAuth.inc({ result }),
        }),
      ),
      onTunnel: (session) => admission.adopt(session),
      tokenRecheck,
      tunnel: {
        keepAliveIntervalMs: config.agent.listen.keepaliveIntervalMs,
        ...tuning?.tunnel,
      },
      onListening: (listener) => {
        published.agents = listener;
      },
    }),
    agentRpcModule(agentRpc),
    usageMetrics,
    agentTrackerModule((t) => {
      published.tracker = t;
    }),
    agentConfigurationModule(config.agent.configuration, (store) => {
      published.configurationStatus = store;
    }),
    gitopsModule(config.agent.gitops, (store) => {
      published.gitopsStatus = store;
    }),
    fluxModule({
      ...(config.gitlab.externalUrl !== undefined && { gitlabExternalUrl: config.gitlab.externalUrl }),
    }),
    clusterViewsModule({
      ...tuning?.clusterViews,
      onHub: (hub) => {
        published.views = hub;
      },
    }),
    serviceProxyModule(),
    kubernetesApiModule(config.agent.kubernetesApi, proxyAccess, kasDataDir(config.dataDir)),
    apiFrontModule(config, secrets, api, gitlabRpc),
    actionCableModule(config.actionCable, () => published.views),
    dashboardModule(
      config.dashboard,
      () => published.views,
      tuning?.dashboard,
      config.connectionLimits,
      () => ({
        ...(published.tracker && { connectedAgents: () => published.tracker!.connectedAgents() }),
        ...(published.configurationStatus && {
          configuration: (id: string) => published.configurationStatus!.get(id),
        }),
        ...(published.gitopsStatus && { gitops: (id: string) => published.gitopsStatus!.get(id) }),
      }),
    ),
  ];
}
