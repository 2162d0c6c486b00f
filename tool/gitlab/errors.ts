/**
 * How a call to GitLab failed, coarse enough to answer it:
 * - unauthenticated: GitLab does not accept the credentials kas asked about (HTTP 401; HTTP 400
 *   where an endpoint answers so for credentials naming no one, see GitLabRefusals.badRequest).
 * - forbidden: GitLab knows them but refuses (HTTP 403).
 * - not_found: what was asked about does not exist, or is hidden from the caller (HTTP 404).
 * - unavailable: kas could not find out (GitLab down, a timeout, a 5xx, an answer of the wrong
 *   shape, GitLab refusing kas's own JWT); worth retrying.
 */
export type GitLabErrorKind = "unauthenticated" | "forbidden" | "not_found" | "unavailable";

/**
 * What GitLab's client throws. Messages never contain the credentials asked about (they are
 * shown to callers and logged); callers map it to their own errors.
 */
export class GitLabError extends Error {
  override name = "GitLabError";
  readonly kind: GitLabErrorKind;
  /** GitLab's HTTP status when it refused (401, 403, 404, 5xx); absent when it did not answer, or answered 200 with a body kas cannot read. */
  readonly status: number | undefined;
  /** GitLab's own message (`{"message": "..."}`, printable, 200 characters at most); "" when none. */
  readonly gitlabMessage: string;

  constructor(
    kind: GitLabErrorKind,
    message: string,
    options: { status?: number; gitlabMessage?: string; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.status = options.status;
    this.gitlabMessage = options.gitlabMessage ?? "";
  }

  /** Whether asking again may get another answer (`unavailable`); the others are GitLab's answer. */
  get retryable(): boolean {
    return this.kind === "unavailable";
  }
}
