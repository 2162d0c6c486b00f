// What kas asks GitLab about a proxy request's credentials, and GitLab's answers (read from its
// wire names in cmd/kas/auth/proxy-gitlab.ts). Ids are decimal strings (GitLab's are int64).
import type { Impersonation } from "../identity.ts";

/** One agent GitLab lets the job use (`allowed_agents[]`), with the ci_access entry GitLab matched. */
export interface AllowedAgent {
  id: string;
  configProjectId: string;
  /** GitLab's copy of the matching ci_access entry: used when kas has no configuration of the agent. */
  configuration: {
    defaultNamespace?: string;
    accessAs?: CiAccessAs;
    /**
     * The entry's `protected_branches_only`. GitLab leaves such an entry out of its answer unless
     * the job's pipeline runs for a protected branch or tag (Rails' CiAccess::FilterService), so one
     * in the answer shows that the ref is protected (see `pipelineRefProtected`).
     */
    protectedBranchesOnly?: boolean;
  };
}

export type CiAccessAs =
  | { agent: Record<string, never> }
  | { impersonate: Impersonation }
  | { ci_job: Record<string, never> }
  | { ci_user: Record<string, never> };

export type { Impersonation } from "../identity.ts";

/** `GET /api/v4/job/allowed_agents` (header `Job-Token`). */
export interface AllowedAgentsForJob {
  allowedAgents: AllowedAgent[];
  job: { id: string };
  pipeline: { id: string };
  /** `path` is the project's full path (`path_with_namespace`), when GitLab says it. */
  project: { id: string; path?: string; groups: { id: string; path?: string }[] };
  user: { id: string; username: string };
  environment?: { slug: string; tier: string };
}

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

/** `POST /api/v4/internal/kubernetes/authorize_proxy_user`. */
export interface ProxyUserAuthorization {
  agent: { id: string; configProjectId: string };
  user: { id: string; username: string };
  accessAs:
    | { agent: Record<string, never> }
    | { user: { projects: readonly RoleAccess[]; groups: readonly RoleAccess[] } };
}

/**
 * GitLab's answers, cached. Rejects with a ProxyAccessError: 401 / 403 / 404 as GitLab refused,
 * 503 when GitLab could not be asked.
 */
export interface ProxyGitLab {
  allowedAgentsForJob(jobToken: string, signal?: AbortSignal): Promise<AllowedAgentsForJob>;
  authorizeProxyUser(request: ProxyUserRequest, signal?: AbortSignal): Promise<ProxyUserAuthorization>;
}
