// Who an agent is, as GitLab's `agent_info` (or the static tokens file) says: the seam's types for
// the authenticators that produce it and the repositories that read from where it points.

import type { GitalyInfo, GitalyRepository } from "../../tool/gitlab/agent-info.ts";

/** Where the agent's project lives in Gitaly, as GitLab's `agent_info` reports it (the client's types). */
export type { GitalyInfo, GitalyRepository } from "../../tool/gitlab/agent-info.ts";

/** Who an agent token belongs to. Ids are decimal strings (GitLab's are 64-bit). */
export interface AgentInfo {
  agentId: string;
  projectId: string;
  agentName: string;
  defaultBranch?: string;
  gitalyInfo?: GitalyInfo;
  gitalyRepository?: GitalyRepository;
  /** Without GitLab: the agent's configuration project as a git repository on kas's disk (static tokens file). */
  localRepository?: string;
  /** Without GitLab: the manifest projects the agent may read, full path -> git repository on kas's disk. */
  localManifestProjects?: Readonly<Record<string, string>>;
}
