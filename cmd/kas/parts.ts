// kas's shared dependencies, built in order: agent authentication, project and proxy access, the
// router, HTTP to agents, the modules' Redis and Git, the per-token tunnel limits. A failed build
// closes what it had opened; `closeKasParts` closes them once the modules and the router are done.
import type { Router } from "../../lib/router/index.ts";
import type { KubernetesApiAccess } from "../../modules/kubernetes_api/kas/module.ts";
import type { ProjectAccess, RepositoryReader } from "../../modules/runtime/index.ts";
import type { GitLabClient } from "../../tool/gitlab/index.ts";
import { AgentHttpProxy } from "../../tool/http/proxy/index.ts";
import { TunnelAdmission } from "./agents/limits/index.ts";
import {
  type ConfiguredAuthenticator,
  createAuthenticatorFromConfig,
  createGitLabClientFromConfig,
  createProjectAccessFromConfig,
  kubernetesProxyAccess,
  SharedAnswerCache,
  TokenRecheck,
} from "./auth/index.ts";
import type { KasConfig, KasSecrets } from "./config/index.ts";
import type { KasMetrics, Logger, ReadinessChecks } from "./observability/index.ts";
import { createRepositories } from "./repositories/index.ts";
import { createKasRouter } from "./routing/index.ts";
import { type KasShared, openKasShared } from "./shared/index.ts";

export interface KasPartsOptions {
  config: KasConfig;
  secrets: KasSecrets;
  log: Logger;
  metrics: KasMetrics;
  readiness: ReadinessChecks;
  redisOverrides: Parameters<typeof createKasRouter>[0]["redisOverrides"];
}

export interface KasParts {
  /** GitLab's REST client, one for every caller; absent without gitlab.address. */
  gitlab: GitLabClient | undefined;
  authenticator: ConfiguredAuthenticator;
  projects: ProjectAccess;
  proxyAccess: KubernetesApiAccess;
  /** Absent when the authenticator does not re-check tokens. */
  tokenRecheck: TokenRecheck | undefined;
  router: Router;
  agentHttp: AgentHttpProxy;
  shared: KasShared;
  repositories: RepositoryReader;
  admission: TunnelAdmission;
}

/** Builds the parts in order; if one fails, those already built are closed (last first) and the error rethrown. */
export function openKasParts(o: KasPartsOptions): Promise<KasParts> {
  const { config, secrets, log, metrics } = o;
  return undoOnFailure(async (opened) => {
    const gitlab = createGitLabClientFromConfig(config, secrets, log);
    opened(() => gitlab?.close());
    const shared = await openKasShared(config, log);
    opened(() => shared.close());
    // Answers from GitLab (agent_info, project_info) are shared through the modules' Redis
    // connection (when there is Redis), so a replica's agents moving to another cost GitLab nothing.
    const answers =
      shared.redis &&
      new SharedAnswerCache({
        redis: shared.redis,
        onError: (err) => log.debug({ err: err.message }, "redis (GitLab answers cache)"),
      });
    const authenticator = await createAuthenticatorFromConfig(config, gitlab, answers);
    const projects = createProjectAccessFromConfig(config, gitlab, answers);
    const proxyAccess = await kubernetesProxyAccess(config);
    const tokenRecheck = createTokenRecheck(authenticator, metrics, log);
    opened(() => tokenRecheck?.destroy());
    const router = await createKasRouter({
      config,
      secrets,
      readiness: o.readiness,
      registry: metrics.registry,
      limitCounter: metrics.requests,
      log,
      redisOverrides: o.redisOverrides,
    });
    opened(() => router.close(0));
    // The router's registry is the one record of this replica's tunnels; the metrics follow it.
    router.local.on("added", (agentId, tunnel) => metrics.tunnels.track(tunnel, agentId));
    const agentHttp = new AgentHttpProxy(router, { dialTimeoutMs: config.agent.dialTimeoutMs });
    opened(() => agentHttp.destroy());
    const repositories = createRepositories({
      gitaly: config.gitaly,
      ...(shared.redis && { redis: shared.redis }),
      registry: metrics.registry,
      log,
    });
    opened(() => repositories.close());
    const admission = createAdmission(o, shared);
    const parts = {
      gitlab,
      authenticator,
      projects,
      proxyAccess,
      tokenRecheck,
      router,
      agentHttp,
      shared,
      repositories,
    };
    return { ...parts, admission };
  });
}

/** Closes what the modules and the router leaned on (they are closed by then). */
export async function closeKasParts(parts: KasParts): Promise<void> {
  parts.admission.close();
  await parts.agentHttp.destroy();
  await parts.repositories.close();
  await parts.shared.close();
  parts.tokenRecheck?.destroy();
  await parts.gitlab?.close();
}

function createTokenRecheck(
  authenticator: ConfiguredAuthenticator,
  metrics: KasMetrics,
  log: Logger,
): TokenRecheck | undefined {
  if (authenticator.recheckIntervalMs === undefined) return undefined;
  return new TokenRecheck({
    authenticator,
    intervalMs: authenticator.recheckIntervalMs,
    onResult: (result) => metrics.agentTokenRecheck.inc({ result }),
    log,
  });
}

/**
 * Per agent token: attempts a minute and tunnels at once, across replicas through the modules'
 * Redis connection (this process's counts without it or while it is down).
 */
function createAdmission(
  { config, secrets, metrics, log }: KasPartsOptions,
  shared: KasShared,
): TunnelAdmission {
  return new TunnelAdmission({
    limits: config.agent.listen,
    ...(shared.redis && { redis: shared.redis }),
    ...(secrets.privateApiSecret && { secret: secrets.privateApiSecret }),
    onRefused: (reason) => metrics.agentTunnelRefusals.inc({ reason }),
    onFallback: (limit) => metrics.agentTunnelLimitFallbacks.inc({ limit }),
    log,
  });
}

/** Runs `build`; if it fails, closes (last first) what it reported as opened, then rethrows. */
async function undoOnFailure<T>(build: (opened: (close: () => unknown) => void) => Promise<T>): Promise<T> {
  const closers: Array<() => unknown> = [];
  try {
    return await build((close) => closers.push(close));
  } catch (err) {
    for (const close of closers.reverse())
      await Promise.resolve()
        .then(close)
        .catch(() => {});
    throw err;
  }
}
