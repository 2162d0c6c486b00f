import type { IncomingMessage } from "node:http";

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
 * Decides who may reach which cluster through the proxy. kas gives one (static dev tokens:
 * `agentTokenAccess` in cmd/kas/auth); GitLab CI-job and user authentication join later.
 */
export type AuthorizeProxyRequest = (req: IncomingMessage, signal: AbortSignal) => Promise<ProxyAccess>;
