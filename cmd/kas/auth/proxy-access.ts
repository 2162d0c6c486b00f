// The Kubernetes API proxy's access as kas's configuration composes it: static dev tokens
// (agent.static_tokens_file, answered by kas's agent authentication), browsers from
// gitlab.external_url, the bound on GitLab's cached answers. What GitLab says about CI jobs and
// users is the module's own business (modules/kubernetes_api/kas/proxy-gitlab.ts, on `deps.gitlab`).
import { ProxyAccessError } from "../../../modules/kubernetes_api/kas/access.ts";
import type { KubernetesApiAccess } from "../../../modules/kubernetes_api/kas/module.ts";
import type { KasConfig } from "../config/index.ts";
import { AgentAuthError } from "./errors.ts";
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

/**
 * Who may use the Kubernetes API proxy besides those GitLab vouches for: holders of the static dev
 * tokens (agent.static_tokens_file); browsers from gitlab.external_url only.
 */
export async function kubernetesProxyAccess(config: KasConfig): Promise<KubernetesApiAccess> {
  const { staticTokensFile } = config.agent;
  const external = config.gitlab.externalUrl;
  return {
    ...(staticTokensFile !== undefined && {
      agentToken: agentTokenAccess(await loadStaticTokens(staticTokensFile)),
      staticTokenOf: (agentId: string) => staticTokenFor(staticTokensFile, agentId),
    }),
    ...(external !== undefined && { cors: { allowedOrigins: [new URL(external).origin] } }),
    gitlabAnswersMaxEntries: config.agent.infoCacheMaxEntries,
  };
}
