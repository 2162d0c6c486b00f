import type { AgentInfo } from "../../../modules/runtime/index.ts";

export type { AgentInfo, GitalyInfo, GitalyRepository } from "../../../modules/runtime/index.ts";

export interface AuthenticateOptions {
  /** Stop waiting (the handshake timed out or the agent went away). */
  signal?: AbortSignal;
}

/** One way of telling who a token belongs to. Rejects with an {@link AgentAuthError}. */
export interface AgentAuthenticator {
  authenticateAgent(token: string, options?: AuthenticateOptions): Promise<AgentInfo>;
}
