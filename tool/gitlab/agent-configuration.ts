// `POST /api/v4/internal/kubernetes/agent_configuration` ({agent_id, agent_config}): kas tells GitLab
// an agent's configuration file, so GitLab keeps its copy of the agent's `ci_access` and
// `user_access` (what allowed_agents and authorize_proxy_user answer from). GitLab answers 204.
import type { GitLabClient, GitLabRefusals } from "./client.ts";
import { GitLabError } from "./errors.ts";

export const AGENT_CONFIGURATION_PATH = "/api/v4/internal/kubernetes/agent_configuration";

const AGENT_CONFIGURATION_REFUSALS: GitLabRefusals = {
  what: "agent_configuration",
  unauthenticated: "GitLab does not accept kas's request",
  forbidden: "GitLab refused the agent's configuration",
  // As GitLab's kas reads it: the agent was deleted in GitLab but still runs in a cluster.
  notFound: "GitLab does not know the agent (deleted?)",
};

/**
 * Posts agent `agentId`'s configuration file. `agentConfig` is the file as protojson of agentcfg's
 * ConfigurationFile (snake_case names: the proto's json_name; durations as "3600s"). Rejects with a
 * GitLabError (`not_found`: GitLab no longer knows the agent), or `signal`'s reason.
 */
export function postAgentConfiguration(
  client: GitLabClient,
  agentId: string,
  agentConfig: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<void> {
  if (!/^[1-9][0-9]{0,18}$/.test(agentId))
    return Promise.reject(
      new RangeError(`agent_configuration: agent id ${JSON.stringify(agentId)} is not GitLab's`),
    );
  return client.request(
    {
      method: "POST",
      path: AGENT_CONFIGURATION_PATH,
      headers: {},
      // GitLab's kas marshals AgentConfigurationRequest with protojson: an int64 is a decimal
      // string (exact beyond 2^53); Rails' `requires :agent_id, type: Integer` takes it.
      json: { agent_id: agentId, agent_config: agentConfig },
      refusals: AGENT_CONFIGURATION_REFUSALS,
      parse: parseAgentConfigurationResponse,
    },
    signal,
  );
}

/** GitLab answers 204 without a body; anything else is not the answer (as GitLab's kas's NoContentResponseHandler). */
export function parseAgentConfigurationResponse(body: unknown): void {
  if (body !== undefined)
    throw new GitLabError("unavailable", "GitLab answered agent_configuration with a body instead of 204");
}
