// What kas knows of one agent's configuration: the last good one, and why a newer one was not taken.
import type { AgentConfiguration } from "../../agentcfg/index.ts";

export interface ConfigurationProblem {
  /** `invalid`: the file was refused (kept: the last good one); `repository`: it could not be read. */
  kind: "invalid" | "repository";
  message: string;
  /** The commit whose file was refused (`invalid` only). */
  commitId?: string;
  /** ISO time. */
  at: string;
}

export interface AgentConfigurationState {
  agentId: string;
  /** The last good configuration (the empty one until a file was read). */
  configuration: AgentConfiguration;
  /**
   * The commit it was read at: "" when the project has no commit or no file for the agent,
   * undefined until the first read.
   */
  commitId: string | undefined;
  /** Why the newest commit is not what the agent has; cleared by the next good read. */
  problem?: ConfigurationProblem;
  /** ISO time of the last poll that reached the repository. */
  checkedAt?: string;
}

/** Where the agent's configuration file is, from its project's root. */
export function configurationPath(agentName: string): string {
  return `.gitlab/agents/${agentName}/config.yaml`;
}
