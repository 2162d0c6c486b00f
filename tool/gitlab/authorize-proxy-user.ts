// `POST /api/v4/internal/kubernetes/authorize_proxy_user` ({agent_id, access_type, access_key,
// csrf_token}): whether a user (a personal access token, or a session cookie with its CSRF token)
// may use an agent through the Kubernetes API proxy, and as whom.
import type { GitLabClient, GitLabRefusals } from "./client.ts";
import { Reader } from "./reader.ts";

export const AUTHORIZE_PROXY_USER_PATH = "/api/v4/internal/kubernetes/authorize_proxy_user";

export type UserAccessType = "personal_access_token" | "session_cookie";

export interface ProxyUserRequest {
  agentId: string;
  accessType: UserAccessType;
  accessKey: string;
  /** With `session_cookie`. */
  csrfToken?: string;
}

export interface RoleAccess {
  id: string;
  roles: readonly string[];
}

/** GitLab's answer. Ids are decimal strings (GitLab's are int64). */
export interface ProxyUserAuthorization {
  agent: { id: string; configProjectId: string };
  user: { id: string; username: string };
  accessAs:
    | { agent: Record<string, never> }
    | { user: { projects: readonly RoleAccess[]; groups: readonly RoleAccess[] } };
}

const AUTHORIZE_USER_REFUSALS: GitLabRefusals = {
  what: "authorize_proxy_user",
  unauthenticated: "GitLab does not accept the user's credentials",
  forbidden: "GitLab does not let the user use this agent",
  notFound: "GitLab does not let the user use this agent",
  // Rails' `bad_request!('Unable to get user from request data')`: no user for the access key.
  badRequest: "GitLab finds no user for the credentials",
};

/** Whether the user of `request` may use its agent. Rejects with a GitLabError (or `signal`'s reason). */
export function authorizeProxyUser(
  client: GitLabClient,
  request: ProxyUserRequest,
  signal?: AbortSignal,
): Promise<ProxyUserAuthorization> {
  return client.request(
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
      refusals: AUTHORIZE_USER_REFUSALS,
      parse: parseAuthorizeProxyUserResponse,
    },
    signal,
  );
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
