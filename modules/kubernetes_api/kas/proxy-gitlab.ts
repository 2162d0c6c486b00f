// GitLab's answers about the Kubernetes API proxy's callers, on GitLab's wire: a CI job's
// `GET /api/v4/job/allowed_agents` (header `Job-Token`) and a user's
// `POST /api/v4/internal/kubernetes/authorize_proxy_user` ({agent_id, access_type, access_key,
// csrf_token}). Cached per credential digest (never the credential itself), one request per key
// at a time; "GitLab could not be asked" is never cached.
import { createHash } from "node:crypto";
import { ProxyAccessError } from "../../../modules/kubernetes_api/kas/access.ts";
import type {
  AllowedAgentsForJob,
  CiAccessAs,
  ProxyGitLab,
  ProxyUserAuthorization,
  ProxyUserRequest,
  RoleAccess,
} from "../../../modules/kubernetes_api/kas/gitlab-answers.ts";
import { Reader } from "./agent-info.ts";
import { AnswerCache, type AnswerCacheOptions } from "./answer-cache.ts";
import { AgentAuthError } from "./errors.ts";
import type { GitLabInternalApi, InternalApiRefusals } from "./gitlab-authenticator.ts";

export const ALLOWED_AGENTS_PATH = "/api/v4/job/allowed_agents";
export const AUTHORIZE_PROXY_USER_PATH = "/api/v4/internal/kubernetes/authorize_proxy_user";

const ALLOWED_AGENTS_REFUSALS: InternalApiRefusals = {
  what: "allowed_agents",
  unauthenticated: "GitLab does not accept the CI job token",
  forbidden: "GitLab refuses the CI job token",
  notFound: "GitLab knows no agents for the CI job token",
};

const AUTHORIZE_USER_REFUSALS: InternalApiRefusals = {
  what: "authorize_proxy_user",
  unauthenticated: "GitLab does not accept the user's credentials",
  forbidden: "GitLab does not let the user use this agent",
  notFound: "GitLab does not let the user use this agent",
};

/** GitLab's answers, cached (agent.kubernetes_api.allowed_agent_cache_ttl and _error_ttl). */
export class GitLabProxyAuthorization implements ProxyGitLab {
  readonly #jobs: AnswerCache<AllowedAgentsForJob, ProxyAccessError>;
  readonly #users: AnswerCache<ProxyUserAuthorization, ProxyAccessError>;

  constructor(
    private readonly api: GitLabInternalApi,
    options: AnswerCacheOptions = {},
  ) {
    const refusal = (err: unknown) => {
      const error = err as ProxyAccessError; // the lookups below throw only these
      return { error, definitive: error.status !== 503 };
    };
    this.#jobs = new AnswerCache(refusal, options);
    this.#users = new AnswerCache(refusal, options);
  }

  allowedAgentsForJob(jobToken: string, signal?: AbortSignal): Promise<AllowedAgentsForJob> {
    // Shared by every caller: no single caller's signal may cancel it; the API's deadline bounds it.
    const lookup = () =>
      this.api
        .call(
          { method: "GET", path: ALLOWED_AGENTS_PATH, headers: { "job-token": jobToken } },
          ALLOWED_AGENTS_REFUSALS,
          parseAllowedAgentsResponse,
        )
        .catch(toAccessError(false));
    return this.#jobs.get(digest("ci", jobToken), lookup, signal);
  }

  authorizeProxyUser(request: ProxyUserRequest, signal?: AbortSignal): Promise<ProxyUserAuthorization> {
    const lookup = () =>
      this.api
        .call(
          {
            method: "POST",
            path: AUTHORIZE_PROXY_USER_PATH,
            headers: {},
            json: {
              agent_id: Number(request.agentId),
              access_type: request.accessType,
              access_key: request.accessKey,
              ...(request.csrfToken !== undefined && { csrf_token: request.csrfToken }),
            },
          },
          AUTHORIZE_USER_REFUSALS,
          parseAuthorizeProxyUserResponse,
        )
        .catch(toAccessError(true));
    const key = digest(request.agentId, request.accessType, request.accessKey, request.csrfToken ?? "");
    return this.#users.get(key, lookup, signal);
  }

  close(): Promise<void> {
    return this.api.close();
  }
}

function digest(...parts: string[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(`${p.length}:${p}`);
  return h.digest("base64");
}

/** GitLab's refusals as the proxy answers them; a user refused in any way is 401, as in GitLab's kas. */
function toAccessError(user: boolean) {
  return (err: unknown): never => {
    if (!(err instanceof AgentAuthError)) {
      throw new ProxyAccessError(503, `cannot ask GitLab: ${(err as Error)?.message ?? String(err)}`);
    }
    if (err.code === "unavailable") throw new ProxyAccessError(503, err.message);
    throw new ProxyAccessError(user ? 401 : err.httpStatus, err.message);
  };
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
      // The ci_access entry as GitLab stored it from the agent's config.yaml: a boolean when set.
      const protectedOnly = configuration.protected_branches_only;
      if (protectedOnly != null && typeof protectedOnly !== "boolean")
        throw r.fail(`allowed_agents[${i}].configuration.protected_branches_only`, "expected a boolean");
      return {
        id: r.id(agent, "id"),
        configProjectId: r.id(r.object(agent.config_project, "config_project"), "id"),
        configuration: {
          ...(namespace && { defaultNamespace: namespace }),
          ...(configuration.access_as != null && { accessAs: ciAccessAs(r, configuration.access_as) }),
          ...(protectedOnly === true && { protectedBranchesOnly: true }),
        },
      };
    }),
    job: { id: r.id(r.object(root.job, "job"), "id") },
    pipeline: { id: r.id(r.object(root.pipeline, "pipeline"), "id") },
    project: {
      id: r.id(project, "id"),
      groups: groups.map((g, i) => {
        const group = r.object(g, `project.groups[${i}]`);
        const path = r.optionalString(group, "full_path", "project.groups.");
        return { id: r.id(group, "id"), ...(path && { path }) };
      }),
    },
    user: { id: r.id(user, "id"), username: r.string(user, "username", "user.") },
  };
  const path = r.optionalString(project, "path_with_namespace", "project.");
  if (path !== undefined) job.project.path = path;
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

/** The body of `authorize_proxy_user`: {agent: {id, config_project: {id}}, user: {id, username}, access_as: {agent: {}} | {user: {projects, groups}}}. */
export function parseAuthorizeProxyUserResponse(body: unknown): ProxyUserAuthorization {
  const r = new Reader("authorize_proxy_user response");
  const root = r.object(body, "");
  const agent = r.object(root.agent, "agent");
  const user = r.object(root.user, "user");
  const accessAs = r.object(root.access_as, "access_as");
  const roles = (list: unknown, field: string): RoleAccess[] => {
    if (list == null) return [];
    if (!Array.isArray(list)) throw r.fail(field, "expected an array");
    return list.map((x) => {
      const o = r.object(x, field);
      const rs = o.roles ?? [];
      if (!Array.isArray(rs) || !rs.every((v) => typeof v === "string" && v !== ""))
        throw r.fail(`${field}.roles`, "expected strings");
      return { id: r.id(o, "id"), roles: rs };
    });
  };
  const asUser = accessAs.user == null ? undefined : r.object(accessAs.user, "access_as.user");
  if (asUser === undefined && accessAs.agent == null) throw r.fail("access_as", "expected agent or user");
  return {
    agent: {
      id: r.id(agent, "id"),
      configProjectId: r.id(r.object(agent.config_project, "agent.config_project"), "id"),
    },
    user: { id: r.id(user, "id"), username: r.string(user, "username", "user.") },
    accessAs: asUser
      ? {
          user: {
            projects: roles(asUser.projects, "access_as.user.projects"),
            groups: roles(asUser.groups, "access_as.user.groups"),
          },
        }
      : { agent: {} },
  };
}
