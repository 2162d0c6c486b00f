// The allowed_agents body as Rails renders it (API::Ci::Jobs `get '/allowed_agents'`,
// Entities::Clusters::Agents::Authorizations::CiAccess: the agent's id, its configuration project
// as a ProjectIdentity, the stored ci_access entry as `configuration`), from what the model found.
// The job's project is its id and its groups' ids only (`project.group&.self_and_ancestor_ids`),
// the environment its slug and tier: no paths, no environment name.

/** What allowed_agents answers for a job, resolved by the model. */
export interface AllowedAgentsAnswer {
  job: { id: number };
  pipeline: { id: number };
  /** The job's project; `groups` are the ids of its group and that group's ancestors, root first. */
  project: { id: number; groups: number[] };
  /** `roles` are the user's in the project (`roles_in_project`). */
  user: { id: number; username: string; roles: string[] };
  environment?: { slug: string; tier: string };
  /** The kept authorizations: each agent, its configuration project, the stored entry. */
  authorizations: {
    agentId: number;
    configProject: { id: number; path: string };
    config: Record<string, unknown>;
  }[];
}

export function allowedAgentsBody(a: AllowedAgentsAnswer) {
  return {
    allowed_agents: a.authorizations.map((auth) => ({
      id: auth.agentId,
      config_project: {
        id: auth.configProject.id,
        path: auth.configProject.path.split("/").at(-1),
        path_with_namespace: auth.configProject.path,
      },
      configuration: auth.config,
    })),
    job: { id: a.job.id },
    pipeline: { id: a.pipeline.id },
    project: { id: a.project.id, groups: a.project.groups.map((id) => ({ id })) },
    user: { id: a.user.id, username: a.user.username, roles_in_project: a.user.roles },
    ...(a.environment && { environment: a.environment }),
  };
}
