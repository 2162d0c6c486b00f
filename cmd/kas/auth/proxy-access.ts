import { ProxyAccessError } from "../../../modules/kubernetes_api/kas/access.ts";
import type { KubernetesApiAccess } from "../../../modules/kubernetes_api/kas/module.ts";
import type { KasConfig, KasSecrets } from "../config/index.ts";
import { AgentAuthError } from "./errors.ts";
import { type AuthLog, GitLabInternalApi, gitlabClientOptions } from "./gitlab-authenticator.ts";
import { GitLabProxyAuthorization } from "./proxy-gitlab.ts";
import { loadStaticTokens, staticTokenFor } from "./static-authenticator.ts";
import type { AgentAuthenticator } from "./types.ts";

/**
 * A static dev token (`Authorization: Bearer <token>`) known to `authenticator`: the request goes
 * to that agent's cluster with the agent's own credentials. For development and the demo only.
 */
export function agentTokenAccess(
  authenticator: AgentAuthenticator,
): NonNullable<KubernetesApiAccess["agentToken"]> {
  return async (token, signal) => {
    try {
      return await authenticator.authenticateAgent(token, { signal });
    } catch (err) {
      if (err instanceof AgentAuthError) throw new ProxyAccessError(err.httpStatus, err.message);
      throw new ProxyAccessError(503, "cannot authenticate the request now");
    }
  };
}

export interface ConfiguredProxyAccess extends KubernetesApiAccess {
  close(): Promise<void>;
}

/**
 * Who may use the Kubernetes API proxy: CI jobs and users through GitLab (gitlab.address), holders
 * of the static dev tokens (agent.static_tokens_file); browsers from gitlab.external_url only.
 */
export async function kubernetesProxyAccess(
  config: KasConfig,
  secrets: KasSecrets,
  log?: AuthLog,
): Promise<ConfiguredProxyAccess> {
  const { staticTokensFile } = config.agent;
  let gitlab: GitLabProxyAuthorization | undefined;
  if (config.gitlab.address !== undefined && secrets.gitlabAuthSecret !== undefined) {
    const { kubernetesApi } = config.agent;
    gitlab = new GitLabProxyAuthorization(
      new GitLabInternalApi(
        gitlabClientOptions(
          { ...config.gitlab, address: config.gitlab.address },
          secrets.gitlabAuthSecret,
          log,
        ),
      ),
      {
        ttlMs: kubernetesApi.allowedAgentCacheTtlMs,
        errorTtlMs: kubernetesApi.allowedAgentCacheErrorTtlMs,
        maxEntries: config.agent.infoCacheMaxEntries,
      },
    );
  }
  const external = config.gitlab.externalUrl;
  return {
    ...(staticTokensFile !== undefined && {
      agentToken: agentTokenAccess(await loadStaticTokens(staticTokensFile)),
      staticTokenOf: (agentId: string) => staticTokenFor(staticTokensFile, agentId),
    }),
    ...(gitlab && { gitlab }),
    ...(external !== undefined && { cors: { allowedOrigins: [new URL(external).origin] } }),
    close: async () => gitlab?.close(),
  };
}
