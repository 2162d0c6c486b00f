// kas, composed: the shared dependencies, and the list of modules built from them. main.ts runs it
// as a process; tests run it in-process. A new capability is a folder under modules/ whose kas
// half joins the list in `kasModules`.
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
import { gitopsModule } from "../../modules/gitops/kas/module.ts";
import { kasDataDir } from "../../modules/kubernetes_api/kas/listener-tls.ts";
import { kubernetesApiModule } from "../../modules/kubernetes_api/kas/module.ts";
import { observabilityModule } from "../../modules/observability/module.ts";
import type {
  AgentSession,
  KasModuleDeps,
  KasModuleFactory,
  RepositoryReader,
} from "../../modules/runtime/index.ts";
import { AgentConfigurations, ModuleRunner } from "../../modules/runtime/index.ts";
import { serviceProxyModule } from "../../modules/service_proxy/kas/module.ts";
import type { GitLabClient } from "../../tool/gitlab/index.ts";
import { AgentHttpProxy } from "../../tool/http/proxy/index.ts";
import { createAgentRpcServer } from "./agent-rpc.ts";
import type { AgentListener } from "./agents/index.ts";
import { TunnelAdmission } from "./agents/limits/index.ts";
import { ApiRouteTable, createGitLabRpcServer } from "./api/index.ts";
import {
  type ConfiguredAuthenticator,
  createAgentAuthenticate,
  createAuthenticatorFromConfig,
  createGitLabClientFromConfig,
  createProjectAccessFromConfig,
  kubernetesProxyAccess,
  TokenRecheck,
} from "./auth/index.ts";
import type { KasConfig, KasSecrets } from "./config/index.ts";
import { agentListenerModule, agentRpcModule, apiFrontModule } from "./core-modules.ts";
import { createKasMetrics, type KasMetrics, type Logger, ReadinessChecks } from "./observability/index.ts";
import { createRepositories } from "./repositories/index.ts";
import { createKasRouter } from "./routing/index.ts";
import { type KasShared, openKasShared } from "./shared/index.ts";

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
  const { config, secrets, log } = options;
  const metrics = options.metrics ?? createKasMetrics();
  const readiness = new ReadinessChecks();
  const agentStreams = new StreamDispatcher<AgentSession>({
    onReject: (err, session) =>
      log.info({ agentId: session.identity.agentId, reason: err.message }, "agent stream refused"),
    // A handler failing after it accepted a stream is a bug or a lost dependency: never silent.
    onHandlerError: (err, header, session) => {
      const kind = kindName(header.kind);
      log.error({ err, agentId: session.identity.agentId, kind }, "agent stream handler failed");
      metrics.agentStreamFailures.inc({ kind });
    },
  });

  let gitlab: GitLabClient | undefined;
  let authenticator: ConfiguredAuthenticator | undefined;
  let tokenRecheck: TokenRecheck | undefined;
  let router: Router | undefined;
  let agentHttp: AgentHttpProxy | undefined;
  let shared: KasShared | undefined;
  let repositories: RepositoryReader | undefined;
  let runner: ModuleRunner<KasModuleDeps> | undefined;
  let agents: AgentListener | undefined;
  let admission: TunnelAdmission | undefined;
  let tracker: AgentTracker | undefined;
  /** The cluster views module's hub, once built (ActionCable and the dashboard follow it). */
  let views: ViewsHub | undefined;
  let stopping: Promise<void> | undefined;

  const stop = async (graceMs = config.shutdownGracePeriodMs): Promise<void> => {
    readiness.add("shutdown", () => {
      throw new Error("shutting down");
    });
    // Tunnels get GoAway at once (agents move while the rest drains; their entries leave Redis
    // as they do) and so do peers' tunnels to the private API; the fronts keep serving, with
    // `Connection: close`, for the drain delay, until load balancers have seen the readiness
    // failure, then finish what is in flight. Routing (forwarding, waiting for an agent's new
    // tunnel) serves them to the end, so the router closes last.
    const deadline = Date.now() + graceMs;
    const delayMs = Math.min(config.shutdownDrainDelayMs, graceMs / 2);
    router?.drain();
    try {
      await runner?.close(graceMs, delayMs);
    } finally {
      await router?.close(Math.max(0, deadline - Date.now()));
    }
    admission?.close();
    await agentHttp?.destroy();
    await repositories?.close();
    await shared?.close();
    tokenRecheck?.destroy();
    await gitlab?.close();
  };

  return {
    metrics,
    readiness,
    agentStreams,
    get router() {
      return router;
    },
    get agents() {
      return agents;
    },
    get tracker() {
      return tracker;
    },
    get views() {
      return views;
    },

    async start() {
      try {
        gitlab = createGitLabClientFromConfig(config, secrets, log);
        authenticator = await createAuthenticatorFromConfig(config, gitlab);
        const projects = createProjectAccessFromConfig(config, gitlab);
        const proxyAccess = await kubernetesProxyAccess(config);
        if (authenticator.recheckIntervalMs !== undefined) {
          tokenRecheck = new TokenRecheck({
            authenticator,
            intervalMs: authenticator.recheckIntervalMs,
            onResult: (result) => metrics.agentTokenRecheck.inc({ result }),
            log,
          });
        }
        router = await createKasRouter({
          config,
          secrets,
          readiness,
          registry: metrics.registry,
          limitCounter: metrics.requests,
          log,
          redisOverrides: options.tuning?.redis,
        });
        // The router's registry is the one record of this replica's tunnels; the metrics follow it.
        router.local.on("added", (agentId, tunnel) => metrics.tunnels.track(tunnel, agentId));
        agentHttp = new AgentHttpProxy(router, { dialTimeoutMs: config.agent.dialTimeoutMs });
        shared = await openKasShared(config, log);
        repositories = createRepositories({
          gitaly: config.gitaly,
          ...(shared.redis && { redis: shared.redis }),
          registry: metrics.registry,
          log,
        });
        // Per agent token: attempts a minute and tunnels at once, across replicas through the
        // modules' Redis connection (this process's counts without it or while it is down).
        admission = new TunnelAdmission({
          limits: config.agent.listen,
          ...(shared.redis && { redis: shared.redis }),
          ...(secrets.privateApiSecret && { secret: secrets.privateApiSecret }),
          onRefused: (reason) => metrics.agentTunnelRefusals.inc({ reason }),
          onFallback: (limit) => metrics.agentTunnelLimitFallbacks.inc({ limit }),
          log,
        });
        const api = new ApiRouteTable();
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
        // Without the API's secret nothing serves them; modules add their services all the same.
        const rpcServices = gitlabRpc || { addService: () => {} };
        // Calls on a draining tunnel end within half its grace, so they end with their own status.
        const agentRpc = createAgentRpcServer(config.shutdownGracePeriodMs / 2);
        const modules: KasModuleFactory[] = [
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
            onTunnel: (session) => admission?.adopt(session),
            tokenRecheck,
            tunnel: {
              keepAliveIntervalMs: config.agent.listen.keepaliveIntervalMs,
              ...options.tuning?.tunnel,
            },
            onListening: (listener) => {
              agents = listener;
            },
          }),
          agentRpcModule(agentRpc),
          agentTrackerModule((t) => {
            tracker = t;
          }),
          agentConfigurationModule(config.agent.configuration),
          gitopsModule(config.agent.gitops),
          clusterViewsModule({
            ...options.tuning?.clusterViews,
            onHub: (hub) => {
              views = hub;
            },
          }),
          serviceProxyModule(),
          kubernetesApiModule(config.agent.kubernetesApi, proxyAccess, kasDataDir(config.dataDir)),
          apiFrontModule(config, secrets, api, gitlabRpc || undefined),
          actionCableModule(config.actionCable, () => views),
          dashboardModule(config.dashboard, () => views, options.tuning?.dashboard, config.connectionLimits),
        ];
        runner = new ModuleRunner(modules);
        await runner.start({
          log,
          registry: metrics.registry,
          requests: metrics.requests,
          readiness,
          router,
          agentHttp,
          agentStreams,
          agentRpc,
          api,
          gitlabRpc: rpcServices,
          repositories,
          projects,
          broadcast: shared.broadcast,
          configurations: new AgentConfigurations(),
          connectionLimits: config.connectionLimits,
          ...(shared.redis && { redis: shared.redis }),
          ...(gitlab && { gitlab }),
        });
      } catch (err) {
        await stop(0).catch(() => {});
        throw err;
      }
      const urls = runner.urls;
      return {
        agent: urls.agent!,
        observability: urls.observability!,
        kubernetesApi: urls.kubernetesApi!,
        ...(urls.api && { api: urls.api }),
        ...(urls.dashboard && { dashboard: urls.dashboard }),
        ...(router.clustered && { privateApi: router.privateUrl }),
      };
    },

    close(graceMs) {
      stopping ??= stop(graceMs);
      return stopping;
    },
  };
}
