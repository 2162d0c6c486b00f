/**
 * Why an agent was not authenticated, coarse enough to answer it:
 * - unauthenticated: no token, a malformed one, or one GitLab does not know (HTTP 401).
 * - permission_denied: GitLab knows the token but refuses it (HTTP 403).
 * - not_found: the agent (or its project) does not exist any more (HTTP 404).
 * - unavailable: kas could not find out (GitLab down, timeout, bad answer, misconfiguration) (HTTP 503); worth retrying.
 */
export type AgentAuthErrorCode = "unauthenticated" | "permission_denied" | "not_found" | "unavailable";

const HTTP_STATUS: Record<AgentAuthErrorCode, number> = {
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  unavailable: 503,
};

/** Messages never contain the token: they are shown to agents and logged. */
export class AgentAuthError extends Error {
  override name = "AgentAuthError";
  readonly code: AgentAuthErrorCode;

  constructor(code: AgentAuthErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  get httpStatus(): number {
    return HTTP_STATUS[this.code];
  }

  /** A definitive answer about the token (cached for the error TTL), as opposed to a failure to get one. */
  get definitive(): boolean {
    return this.code !== "unavailable";
  }
}
