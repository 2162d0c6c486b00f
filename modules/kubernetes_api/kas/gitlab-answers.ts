// What kas asks GitLab about a proxy request's credentials, and GitLab's answers: the types of
// GitLab's client (tool/gitlab/allowed-agents.ts, authorize-proxy-user.ts), with ids as decimal
// strings (GitLab's are int64).
export type {
  AllowedAgent,
  AllowedAgentsForJob,
  CiAccessAs,
  ProxyUserAuthorization,
  ProxyUserRequest,
  RoleAccess,
  UserAccessType,
} from "../../../tool/gitlab/index.ts";

import type { ClientLeaving } from "./access.ts";

export type { Impersonation } from "../identity.ts";

import type {
  AllowedAgentsForJob,
  ProxyUserAuthorization,
  ProxyUserRequest,
} from "../../../tool/gitlab/index.ts";

/**
 * GitLab's answers, cached (GitLabProxyAuthorization). Rejects with a ProxyAccessError: 401 / 403 /
 * 404 as GitLab refused, 503 when GitLab could not be asked.
 */
export interface ProxyGitLab {
  allowedAgentsForJob(jobToken: string, signal?: ClientLeaving): Promise<AllowedAgentsForJob>;
  authorizeProxyUser(request: ProxyUserRequest, signal?: ClientLeaving): Promise<ProxyUserAuthorization>;
}
