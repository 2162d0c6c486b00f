/** Where the agent's project lives in Gitaly, as GitLab's `agent_info` reports it. */
export interface GitalyInfo {
  address: string;
  /** A secret: never log it. */
  token?: string;
  features: Record<string, string>;
}

export interface GitalyRepository {
  storageName: string;
  relativePath: string;
  glRepository: string;
  glProjectPath: string;
  gitObjectDirectory?: string;
  gitAlternateObjectDirectories?: string[];
}

/** Who an agent token belongs to. Ids are decimal strings (GitLab's are 64-bit). */
export interface AgentInfo {
  agentId: string;
  projectId: string;
  agentName: string;
  defaultBranch?: string;
  gitalyInfo?: GitalyInfo;
  gitalyRepository?: GitalyRepository;
}

export interface AuthenticateOptions {
  /** Stop waiting (the handshake timed out or the agent went away). */
  signal?: AbortSignal;
}

/** One way of telling who a token belongs to. Rejects with an {@link AgentAuthError}. */
export interface AgentAuthenticator {
  authenticateAgent(token: string, options?: AuthenticateOptions): Promise<AgentInfo>;
}
