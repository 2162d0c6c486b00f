import type { IncomingMessage } from "node:http";
import type { LazySignal } from "../../../tool/gitlab/index.ts";
import { encodeIdentity, type Impersonation } from "../identity.ts";

/** Whose cluster a proxied request goes to, and as whom. */
export interface ProxyAccess {
  agentId: string;
  /** Whom the cluster sees; absent: the agent's own identity. */
  impersonate?: Impersonation;
  /** The same decision as agentk reads it (the `Kas-Identity` header's value), encoded once. */
  identity: string;
}

const AS_AGENT = encodeIdentity({ as: "agent" });

/** The access of a request that reaches agent `agentId`'s cluster as `who` (absent: as the agent). */
export function proxyAccess(agentId: string, who?: Impersonation): ProxyAccess {
  return who === undefined
    ? { agentId, identity: AS_AGENT }
    : { agentId, impersonate: who, identity: encodeIdentity({ as: "impersonate", who }) };
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
 * The client's leaving, which stops a wait for GitLab: an AbortSignal, or a function that makes
 * one, called only when there is a wait (most requests are answered from the cache: making a
 * signal for each cost kas's proxy a few µs per request).
 */
export type ClientLeaving = LazySignal;

/**
 * Decides who may reach which cluster through the proxy, and as whom (`authorizeProxyRequest`:
 * CI jobs and users through GitLab, static dev tokens).
 */
export type AuthorizeProxyRequest = (req: IncomingMessage, signal: ClientLeaving) => Promise<ProxyAccess>;
