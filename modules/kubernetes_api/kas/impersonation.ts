// As whom kas has the cluster see a request: GitLab's identities (`gitlab:ci_job:<id>`,
// `gitlab:user:<name>`, their groups and `agent.gitlab.com/` extras), which agentk sends to the
// API server as Impersonate-* headers under its own credentials (see ../identity.ts).
import type { Impersonation } from "../identity.ts";
import type {
  AllowedAgent,
  AllowedAgentsForJob,
  ProxyUserAuthorization,
  RoleAccess,
} from "./gitlab-answers.ts";

const EXTRA = "agent.gitlab.com/";

/** The CI job itself (`access_as: {ci_job: {}}`). */
export function ciJobIdentity(job: AllowedAgentsForJob, agent: AllowedAgent): Impersonation {
  const { project, environment } = job;
  const groups = ["gitlab:ci_job"];
  for (const group of project.groups) {
    groups.push(`gitlab:group:${group.id}`);
    if (environment) groups.push(`gitlab:group_env_tier:${group.id}:${environment.tier}`);
  }
  groups.push(`gitlab:project:${project.id}`);
  if (environment) {
    groups.push(
      `gitlab:project_env:${project.id}:${environment.slug}`,
      `gitlab:project_env_tier:${project.id}:${environment.tier}`,
    );
  }
  const extra = [
    { key: `${EXTRA}id`, val: [agent.id] },
    { key: `${EXTRA}config_project_id`, val: [agent.configProjectId] },
    { key: `${EXTRA}project_id`, val: [project.id] },
    { key: `${EXTRA}ci_pipeline_id`, val: [job.pipeline.id] },
    { key: `${EXTRA}ci_job_id`, val: [job.job.id] },
    { key: `${EXTRA}username`, val: [job.user.username] },
  ];
  if (environment) {
    extra.push(
      { key: `${EXTRA}environment_slug`, val: [environment.slug] },
      { key: `${EXTRA}environment_tier`, val: [environment.tier] },
    );
  }
  return { username: `gitlab:ci_job:${job.job.id}`, groups, extra };
}

/** The user who started the job (`access_as: {ci_user: {}}`; GitLab reserves it). */
export function ciUserIdentity(job: AllowedAgentsForJob, agent: AllowedAgent): Impersonation {
  const base = ciJobIdentity(job, agent);
  return { ...base, username: `gitlab:user:${job.user.username}`, groups: ["gitlab:user", ...base.groups] };
}

/** A GitLab user (`user_access.access_as: {user: {}}`), with their roles in the configured projects and groups. */
export function userIdentity(auth: ProxyUserAuthorization, accessType: string): Impersonation {
  const groups = ["gitlab:user"];
  const user = (auth.accessAs as { user?: { projects: RoleAccess[]; groups: RoleAccess[] } }).user;
  if (user !== undefined) {
    for (const p of user.projects)
      for (const role of p.roles) groups.push(`gitlab:project_role:${p.id}:${role}`);
    for (const g of user.groups) for (const role of g.roles) groups.push(`gitlab:group_role:${g.id}:${role}`);
  }
  return {
    username: `gitlab:user:${auth.user.username}`,
    groups,
    extra: [
      { key: `${EXTRA}id`, val: [auth.agent.id] },
      { key: `${EXTRA}username`, val: [auth.user.username] },
      { key: `${EXTRA}access_type`, val: [accessType] },
      { key: `${EXTRA}config_project_id`, val: [auth.agent.configProjectId] },
    ],
  };
}
