import type { IncomingMessage } from "node:http";
import { AgentAuthError, type AgentAuthenticator, bearerToken } from "../auth/index.ts";

/** Whose cluster a proxied request goes to, and as whom. */
export interface ProxyAccess {
  agentId: string;
  /** `Impersonate-*` headers kas sets for the agent to pass on (user / CI-job access, later). */
  impersonate?: Readonly<Record<string, string>>;
}

/** Refusal of a proxied request: 401, 403, 404 or 503, with a message safe to return. */
export class ProxyAccessError extends Error {
  override name = "ProxyAccessError";
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * Decides who may reach which cluster through the proxy. This slice has one kind (static dev
 * tokens); GitLab CI-job and user authentication join later as other implementations.
 */
export type AuthorizeProxyRequest = (req: IncomingMessage, signal: AbortSignal) => Promise<ProxyAccess>;

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
