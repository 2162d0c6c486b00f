import type { IncomingMessage } from "node:http";

/** Whose cluster a proxied request goes to, and as whom. */
export interface ProxyAccess {
  agentId: string;
  /**
   * `Impersonate-*` headers kas sets for the agent to pass on (lowercase names; a list is sent as
   * repeated headers). Absent: the agent's own identity.
   */
  impersonate?: Readonly<Record<string, string | readonly string[]>>;
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
 * Decides who may reach which cluster through the proxy, and as whom (`authorizeProxyRequest`:
 * CI jobs and users through GitLab, static dev tokens).
 */
export type AuthorizeProxyRequest = (req: IncomingMessage, signal: AbortSignal) => Promise<ProxyAccess>;
