// `GET /api/v4/job/allowed_agents` (header `Job-Token`): the agents a CI job may use, with the
// `ci_access` entry GitLab matched for each, and who the job is (job, pipeline, project, user,
// environment).
import type { GitLabClient, GitLabRefusals } from "./client.ts";
import { Reader } from "./reader.ts";

export const ALLOWED_AGENTS_PATH = "/api/v4/job/allowed_agents";

/** `access_as.impersonate` of a ci_access entry: whom the cluster sees. */
export interface ImpersonateConfig {
  username: string;
  groups: readonly string[];
  uid?: string;
  extra: readonly { key: string; val: readonly string[] }[];
}

export type CiAccessAs =
  | { agent: Record<string, never> }
  | { impersonate: ImpersonateConfig }
  | { ci_job: Record<string, never> }
  | { ci_user: Record<string, never> };

/**
 * One agent GitLab lets the job use (`allowed_agents[]`): Rails has applied the agent's ci_access
 * (projects, groups, the implicit authorization of its own project, `environments`,
 * `protected_branches_only`) to the job, and sends the entry it matched.
 */
export interface AllowedAgent {
  id: string;
  configProjectId: string;
  /** The matched ci_access entry as GitLab stored it: as whom the job reaches the cluster. */
  configuration: {
    defaultNamespace?: string;
    accessAs?: CiAccessAs;
  };
}

/**
 * GitLab's answer. Ids are decimal strings (GitLab's are int64). Rails sends the project's id and
 * its groups' ids only (no paths), and the environment's slug and tier (not its name).
 */
export interface AllowedAgentsForJob {
  allowedAgents: AllowedAgent[];
  job: { id: string };
  pipeline: { id: string };
  project: { id: string; groups: { id: string }[] };
  user: { id: string; username: string };
  environment?: { slug: string; tier: string };
}

const ALLOWED_AGENTS_REFUSALS: GitLabRefusals = {
  what: "allowed_agents",
  unauthenticated: "GitLab does not accept the CI job token",
  forbidden: "GitLab refuses the CI job token",
  notFound: "GitLab knows no agents for the CI job token",
};

/** The agents the job of `jobToken` may use. Rejects with a GitLabError (or `signal`'s reason). */
export function getAllowedAgentsForJob(
  client: GitLabClient,
  jobToken: string,
  signal?: AbortSignal,
): Promise<AllowedAgentsForJob> {
  return client.request(
    {
      method: "GET",
      path: ALLOWED_AGENTS_PATH,
      headers: { "job-token": jobToken },
      refusals: ALLOWED_AGENTS_REFUSALS,
      parse: parseAllowedAgentsResponse,
    },
    signal,
  );
}

/** The body of `allowed_agents`, GitLab's wire names (see AllowedAgentsForJob). */
export function parseAllowedAgentsResponse(body: unknown): AllowedAgentsForJob {
  const r = new Reader("allowed_agents response");
  const root = r.object(body, "");
  const list = root.allowed_agents ?? [];
  if (!Array.isArray(list)) throw r.fail("allowed_agents", "expected an array");
  const project = r.object(root.project, "project");
  const groups = project.groups ?? [];
  if (!Array.isArray(groups)) throw r.fail("project.groups", "expected an array");
  const user = r.object(root.user, "user");
  const job: AllowedAgentsForJob = {
    allowedAgents: list.map((a, i) => {
      const agent = r.object(a, `allowed_agents[${i}]`);
      const configuration = agent.configuration == null ? {} : r.object(agent.configuration, "configuration");
      const namespace = r.optionalString(configuration, "default_namespace", "configuration.", true);
      return {
        id: r.id(agent, "id"),
        configProjectId: r.id(r.object(agent.config_project, "config_project"), "id"),
        configuration: {
          ...(namespace && { defaultNamespace: namespace }),
          ...(configuration.access_as != null && { accessAs: ciAccessAs(r, configuration.access_as) }),
        },
      };
    }),
    job: { id: r.id(r.object(root.job, "job"), "id") },
    pipeline: { id: r.id(r.object(root.pipeline, "pipeline"), "id") },
    project: {
      id: r.id(project, "id"),
      groups: groups.map((g, i) => ({ id: r.id(r.object(g, `project.groups[${i}]`), "id") })),
    },
    user: { id: r.id(user, "id"), username: r.string(user, "username", "user.") },
  };
  if (root.environment != null) {
    const env = r.object(root.environment, "environment");
    job.environment = {
      slug: r.string(env, "slug", "environment."),
      tier: r.string(env, "tier", "environment.", true),
    };
  }
  return job;
}

function ciAccessAs(r: Reader, value: unknown): CiAccessAs {
  const o = r.object(value, "configuration.access_as");
  if (o.impersonate != null) {
    const imp = r.object(o.impersonate, "access_as.impersonate");
    const strings = (v: unknown, field: string): string[] => {
      if (v == null) return [];
      if (!Array.isArray(v) || !v.every((x) => typeof x === "string"))
        throw r.fail(field, "expected strings");
      return v;
    };
    const extra = imp.extra == null ? [] : imp.extra;
    if (!Array.isArray(extra)) throw r.fail("access_as.impersonate.extra", "expected an array");
    const uid = r.optionalString(imp, "uid", "access_as.impersonate.");
    return {
      impersonate: {
        username: r.string(imp, "username", "access_as.impersonate."),
        groups: strings(imp.groups, "access_as.impersonate.groups"),
        ...(uid && { uid }),
        extra: extra.map((e) => {
          const kv = r.object(e, "access_as.impersonate.extra[]");
          return { key: r.string(kv, "key", "extra."), val: strings(kv.val, "extra.val") };
        }),
      },
    };
  }
  if (o.ci_job != null) return { ci_job: {} };
  if (o.ci_user != null) return { ci_user: {} };
  return { agent: {} };
}
