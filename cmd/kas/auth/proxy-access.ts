import type { AuthorizeProxyRequest } from "../../../modules/kubernetes_api/kas/access.ts";
import { ProxyAccessError } from "../../../modules/kubernetes_api/kas/access.ts";
import type { KasConfig } from "../config/index.ts";
import { AgentAuthError } from "./errors.ts";
import { bearerToken } from "./handshake.ts";
import { loadStaticTokens } from "./static-authenticator.ts";
import type { AgentAuthenticator } from "./types.ts";

/**
 * `Authorization: Bearer <token>` where the token is an agent token known to `authenticator`
 * (the static tokens file): the request goes to that agent's cluster, with the agent's own
 * credentials. For development and the demo only.
 */
export function agentTokenAccess(authenticator: AgentAuthenticator): AuthorizeProxyRequest {
  return async (req, signal) => {
    const token = bearerToken(req.headers.authorization);
    if (token === undefined) throw new ProxyAccessError(401, 'expected "Authorization: Bearer <token>"');
    try {
      const agent = await authenticator.authenticateAgent(token, { signal });
      return { agentId: agent.agentId };
    } catch (err) {
      if (err instanceof AgentAuthError) throw new ProxyAccessError(err.httpStatus, err.message);
      throw new ProxyAccessError(503, "cannot authenticate the request now");
    }
  };
}

/** Who may use the Kubernetes API proxy: for now, holders of the static dev tokens. */
export async function kubernetesProxyAccess(config: KasConfig): Promise<AuthorizeProxyRequest> {
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
