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

  /** `err` itself when it is one; anything else (a bug, a failure nobody classified) as `unavailable`, kept as the cause. */
  static from(err: unknown): AgentAuthError {
    return err instanceof AgentAuthError
      ? err
      : new AgentAuthError("unavailable", "authentication failed", { cause: err });
  }

  /**
   * For logs: what went wrong underneath, when the message alone ("authentication failed") does
   * not say. Nobody vouches for a foreign error's text, so the token is cut out of it.
   */
  causeText(token: string): string | undefined {
    const cause = this.cause;
    if (cause === undefined || cause instanceof AgentAuthError) return undefined;
    const text = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
    return token === "" ? text : text.replaceAll(token, "[token]");
  }

  get httpStatus(): number {
    return HTTP_STATUS[this.code];
  }

  /** A definitive answer about the token (cached for the error TTL), as opposed to a failure to get one. */
  get definitive(): boolean {
    return this.code !== "unavailable";
  }
}
