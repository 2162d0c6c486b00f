// GitLab's answers about the Kubernetes API proxy's callers, through GitLab's client (`deps.gitlab`,
// tool/gitlab): a CI job's `allowed_agents` and a user's `authorize_proxy_user`. Cached per
// credential digest (never the credential itself), one request per key at a time; "GitLab could
// not be asked" is never cached. GitLab's errors become the proxy's (ProxyAccessError).
import { hash } from "node:crypto";
import {
  type AllowedAgentsForJob,
  AnswerCache,
  type AnswerCacheOptions,
  authorizeProxyUser,
  type GitLabClient,
  GitLabError,
  type GitLabErrorKind,
  getAllowedAgentsForJob,
  type ProxyUserAuthorization,
  type ProxyUserRequest,
} from "../../../tool/gitlab/index.ts";
import { type ClientLeaving, ProxyAccessError } from "./access.ts";
import type { ProxyGitLab } from "./gitlab-answers.ts";

/** GitLab's answers, cached (agent.kubernetes_api.allowed_agent_cache_ttl and _error_ttl). */
export class GitLabProxyAuthorization implements ProxyGitLab {
  readonly #jobs: AnswerCache<AllowedAgentsForJob, ProxyAccessError>;
  readonly #users: AnswerCache<ProxyUserAuthorization, ProxyAccessError>;

  /** `client` stays its owner's (kas's composition): closing it is the owner's business. */
  constructor(
    private readonly client: GitLabClient,
    options: AnswerCacheOptions = {},
  ) {
    const refusal = (err: unknown) => {
      const error = err as ProxyAccessError; // the lookups below throw only these
      return { error, definitive: error.status !== 503 };
    };
    this.#jobs = new AnswerCache(refusal, options);
    this.#users = new AnswerCache(refusal, options);
  }

  allowedAgentsForJob(jobToken: string, signal?: ClientLeaving): Promise<AllowedAgentsForJob> {
    // Shared by every caller: no single caller's signal may cancel it; the client's deadline bounds it.
    return this.#jobs.get(
      digest("ci", jobToken),
      () => getAllowedAgentsForJob(this.client, jobToken).catch(toAccessError(false)),
      signal,
    );
  }

  authorizeProxyUser(request: ProxyUserRequest, signal?: ClientLeaving): Promise<ProxyUserAuthorization> {
    const key = digest(request.agentId, request.accessType, request.accessKey, request.csrfToken ?? "");
    return this.#users.get(
      key,
      () => authorizeProxyUser(this.client, request).catch(toAccessError(true)),
      signal,
    );
  }
}

/** Each part length-prefixed, so no two lists of parts share a digest. One-shot `hash`: half of `createHash`'s cost, per request. */
function digest(...parts: string[]): string {
  let text = "";
  for (const p of parts) text += `${p.length}:${p}`;
  return hash("sha256", text, "base64");
}

const REFUSAL_STATUS: Record<Exclude<GitLabErrorKind, "unavailable">, number> = {
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
};

/**
 * GitLab's refusals as the proxy answers them. A user refused in any way is 401, as in GitLab's kas
 * (which gives 401 for GitLab's 401/403/404). That includes authorize_proxy_user's 400 "Unable to
 * get user from request data", GitLab's answer for a personal access token it does not know (the
 * client's `unauthenticated`, see GitLabRefusals.badRequest): a bad token is the client's fault, so
 * 401 rather than the 500 GitLab's kas gives for it.
 */
function toAccessError(user: boolean) {
  return (err: unknown): never => {
    if (!(err instanceof GitLabError)) {
      throw new ProxyAccessError(503, `cannot ask GitLab: ${(err as Error)?.message ?? String(err)}`);
    }
    if (err.kind === "unavailable") throw new ProxyAccessError(503, err.message);
    throw new ProxyAccessError(user ? 401 : REFUSAL_STATUS[err.kind], err.message);
  };
}
