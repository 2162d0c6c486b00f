// kas, composed: every module is built here from a KasConfig, in one place. main.ts runs it as
// a process; tests run it in-process. Modules to come (GitOps, Gitaly, informer cache, GitLab
// CI/user access to the Kubernetes proxy) join here: stream kinds agents open go to
// `agentStreams`, proxy access rules replace `agentTokenAccess`.
import type { Router, RouterOptions } from "../../lib/router/index.ts";
import { kindName } from "../../lib/tunnel/header/index.ts";
import { StreamDispatcher, type TunnelOptions } from "../../lib/tunnel/index.ts";
import { type AgentListener, type AgentSession, serveAgents } from "./agents/index.ts";
import { serveApi } from "./api/index.ts";
import {
  type ConfiguredAuthenticator,
  createAgentAuthenticate,
  createAuthenticatorFromConfig,
  loadStaticTokens,
  TokenRecheck,
} from "./auth/index.ts";
import type { KasConfig, KasSecrets } from "./config/index.ts";
import { AgentHttpProxy, type HttpListener } from "./http/index.ts";
import {
  type AuthorizeProxyRequest,
  agentTokenAccess,
  ProxyAccessError,
  serveKubernetesProxy,
} from "./kubernetes-proxy/index.ts";
import {
  createKasMetrics,
  type KasMetrics,
  type Logger,
  type ObservabilityServer,
  ReadinessChecks,
  serveObservability,
} from "./observability/index.ts";
import { createKasRouter } from "./routing/index.ts";

export interface KasServerOptions {
  config: KasConfig;
  secrets: KasSecrets;
  log: Logger;
  /** Default: a fresh registry with kas's metrics. */
  metrics?: KasMetrics;
  /** For tests: faster Redis timings, yamux settings. */
  tuning?: { redis?: Partial<NonNullable<RouterOptions["redis"]>>; tunnel?: TunnelOptions };
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
}

export interface KasServer {
  readonly metrics: KasMetrics;
  /** Where modules register the stream kinds agents open (before `start`). */
  readonly agentStreams: StreamDispatcher<AgentSession>;
  readonly readiness: ReadinessChecks;
  /** Set once started. */
  readonly router: Router | undefined;
  readonly agents: AgentListener | undefined;
  /** Builds and starts every module; on failure, whatever started is stopped again. */
  start(): Promise<KasAddresses>;
  /**
   * Graceful stop: not ready, no new connections, GoAway to every tunnel, requests and streams
   * in flight get `graceMs` (default shutdown_grace_period) to finish, unregister from Redis.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
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

  let authenticator: ConfiguredAuthenticator | undefined;
  let tokenRecheck: TokenRecheck | undefined;
  let observability: ObservabilityServer | undefined;
  let router: Router | undefined;
  let agents: AgentListener | undefined;
  let proxy: AgentHttpProxy | undefined;
  let api: HttpListener | undefined;
  let kubernetesApi: HttpListener | undefined;
  let stopping: Promise<void> | undefined;

  const stop = async (graceMs = config.shutdownGracePeriodMs): Promise<void> => {
    readiness.add("shutdown", () => {
      throw new Error("shutting down");
    });
    const fronts = Promise.all([api?.close(graceMs), kubernetesApi?.close(graceMs)]).then(() =>
      proxy?.close(),
    );
    await Promise.all([
      fronts,
      agents?.close(graceMs), // GoAway to every tunnel; their streams get the grace period
      router?.close({ graceMs }), // withdraws this replica from Redis first
    ]);
    await proxy?.destroy();
    await observability?.close();
    tokenRecheck?.close();
    await authenticator?.close();
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

    async start() {
      try {
        authenticator = await createAuthenticatorFromConfig(config, secrets, log);
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
          log,
          redisOverrides: options.tuning?.redis,
        });
        observability = await serveObservability({
          listen: config.observability.listen.address,
          registry: metrics.registry,
          readiness,
          paths: {
            metrics: config.observability.prometheus.urlPath,
            liveness: config.observability.livenessProbe.urlPath,
            readiness: config.observability.readinessProbe.urlPath,
          },
          log,
        });
        agents = await serveAgents({
          listen: config.agent.listen,
          router,
          metrics: metrics.tunnels,
          authenticate: createAgentAuthenticate({
            authenticator,
            log,
            onResult: (result) => metrics.agentAuth.inc({ result }),
          }),
          handshakeTimeoutMs: config.agent.listen.handshakeTimeoutMs,
          maxConnectionAgeMs: config.agent.listen.maxConnectionAgeMs,
          ageDrainGraceMs: config.shutdownGracePeriodMs,
          dispatcher: agentStreams,
          ...(tokenRecheck && { tokenRecheck }),
          tunnel: { keepAliveIntervalMs: config.agent.listen.keepaliveIntervalMs, ...options.tuning?.tunnel },
          log,
        });
        proxy = new AgentHttpProxy(router, { dialTimeoutMs: config.agent.dialTimeoutMs });
        if (secrets.apiSecret !== undefined) {
          api = await serveApi({
            listen: config.api.listen,
            secret: secrets.apiSecret,
            agents,
            proxy,
            metrics: metrics.requests,
            log,
          });
        } else {
          log.warn({}, "API for GitLab disabled: api.listen.authentication_secret_file is not set");
        }
        kubernetesApi = await serveKubernetesProxy({
          listen: config.agent.kubernetesApi.listen,
          urlPathPrefix: config.agent.kubernetesApi.urlPathPrefix,
          authorize: await proxyAccess(config),
          proxy,
          metrics: metrics.requests,
          log,
        });
      } catch (err) {
        await stop(0).catch(() => {});
        throw err;
      }
      return {
        agent: agents.url,
        observability: observability.url,
        kubernetesApi: kubernetesApi.url,
        ...(api && { api: api.url }),
        ...(router.clustered && { privateApi: router.privateUrl }),
      };
    },

    stop({ graceMs } = {}) {
      stopping ??= stop(graceMs);
      return stopping;
    },
  };
}

/** This slice: the static dev tokens name the agent whose cluster a proxy request goes to. */
async function proxyAccess(config: KasConfig): Promise<AuthorizeProxyRequest> {
  if (config.agent.staticTokensFile === undefined) {
    return async () => {
      throw new ProxyAccessError(
        401,
        "the Kubernetes API proxy accepts static dev tokens only, and none are configured",
      );
    };
  }
  return agentTokenAccess(await loadStaticTokens(config.agent.staticTokensFile));
}
