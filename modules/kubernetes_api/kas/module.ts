// The Kubernetes API proxy's kas half: its own listener (8154), where users and CI jobs reach an
// agent's cluster; requests go over the agent's tunnel to the module's agentk half. On GitLab's
// API, a kubeconfig for an agent's cluster through it.
import {
  type KasModuleDeps,
  type KasModuleFactory,
  type Listening,
  listenerModule,
  Phase,
} from "../../runtime/index.ts";
import { authorizeProxyRequest, type ProxyAuthorizationOptions } from "./authorize.ts";
import type { KubernetesApiConfig } from "./config.ts";
import type { CorsPolicy } from "./cors.ts";
import { kubeconfigRoute } from "./kubeconfig-route.ts";
import { proxyTls } from "./listener-tls.ts";
import { GitLabProxyAuthorization } from "./proxy-gitlab.ts";
import { serveKubernetesProxy } from "./proxy-server.ts";
import { type CountProxyRequest, proxyUsageCounters } from "./usage.ts";

/**
 * Who may use the proxy besides CI jobs and users (whom GitLab vouches for, through `deps.gitlab`),
 * as kas's composition decides it.
 */
export interface KubernetesApiAccess extends Omit<ProxyAuthorizationOptions, "gitlab"> {
  cors?: CorsPolicy;
  /** GitLab's answers kept at most (agent.info_cache_max_entries); default AnswerCache's. */
  gitlabAnswersMaxEntries?: number;
  /** The agent's static dev token, if it has one: the token of the kubeconfig GitLab's API answers. */
  staticTokenOf?: (agentId: string) => Promise<string | undefined>;
}

/**
 * `dataDir`: where kas keeps the certificate it makes when none is configured. CI jobs and users
 * are asked about at GitLab (`deps.gitlab`); without it they are refused.
 */
export function kubernetesApiModule(
  config: KubernetesApiConfig,
  access: KubernetesApiAccess,
  dataDir: string,
): KasModuleFactory {
  let listening: Listening | undefined;
  /** Registered while the module is built (usage names are taken once). */
  let count: CountProxyRequest | undefined;
  // A front: it starts last and stops first (no new requests; those in flight get the grace period).
  const front = listenerModule<KasModuleDeps>(
    "kubernetes_api",
    Phase.front,
    "kubernetesApi",
    async ({ log, requests, agentHttp, connectionLimits, gitlab }) => {
      const tls = await proxyTls(config, dataDir);
      const gitlabAnswers =
        gitlab &&
        new GitLabProxyAuthorization(gitlab, {
          ttlMs: config.allowedAgentCacheTtlMs,
          errorTtlMs: config.allowedAgentCacheErrorTtlMs,
          ...(access.gitlabAnswersMaxEntries !== undefined && { maxEntries: access.gitlabAnswersMaxEntries }),
        });
      if (tls.caFile)
        log.info({ caFile: tls.caFile }, "Kubernetes API proxy: TLS with kas's own certificate");
      listening = await serveKubernetesProxy({
        listen: { ...config.listen, ...tls },
        urlPathPrefix: config.urlPathPrefix,
        authorize: authorizeProxyRequest({
          ...(access.agentToken && { agentToken: access.agentToken }),
          ...(gitlabAnswers && { gitlab: gitlabAnswers }),
          ...(count && { count }),
        }),
        proxy: agentHttp,
        metrics: requests,
        ...(access.cors && { cors: access.cors }),
        log,
        limits: connectionLimits,
      });
      return listening;
    },
  );
  /** The configuration with the port bound (listen.address may say 0: any free port). */
  const bound = (): KubernetesApiConfig => {
    if (listening === undefined) return config;
    const port = Number(new URL(listening.url).port);
    return { ...config, listen: { ...config.listen, address: { ...config.listen.address, port } } };
  };
  return {
    ...front,
    create(deps) {
      count = proxyUsageCounters(deps.usage);
      deps.api.add(
        kubeconfigRoute({
          config: bound,
          dataDir,
          ...(access.staticTokenOf && { staticTokenOf: access.staticTokenOf }),
        }),
      );
      return front.create(deps);
    },
  };
}
