import { describeJwtError, verifyShortLivedJwt } from "../../../lib/jwt/short-lived.ts";

/** Header GitLab puts its JWT in when it calls kas (the same name kas uses toward GitLab). */
export const GITLAB_REQUEST_HEADER = "gitlab-kas-api-request";
export const GITLAB_JWT_ISSUER = "gitlab";
export const GITLAB_JWT_AUDIENCE = "gitlab-kas";
/**
 * GitLab signs a fresh JWT for every call to kas, valid 60 s (JSONWebToken::Token's
 * DEFAULT_EXPIRE_TIME, used by Gitlab::Kas::Client; `nbf` 5 s back). A little above that, and
 * never more: a longer-lived token is not one GitLab made for a call.
 */
export const GITLAB_JWT_MAX_LIFETIME_SEC = 90;
/** Clock skew tolerated between GitLab and kas on `exp`, `nbf` and `iat`. */
export const GITLAB_JWT_CLOCK_TOLERANCE_SEC = 5;

export class ApiAuthError extends Error {
  override name = "ApiAuthError";
}

export interface GitLabJwtOptions {
  /**
   * The `iss` required; default `gitlab`. `null`: any. GitLab's gRPC client signs with its host
   * name as issuer (Gitlab::Kas::Client), which kas cannot know, so over gRPC the issuer is the
   * one rule left out, as the reference kas does; every other rule is the same on both fronts.
   */
  issuer?: string | null;
  /** Where the token came from, for the reasons given (default: the `Gitlab-Kas-Api-Request` header). */
  source?: string;
  /** Current time in ms. Default `Date.now`. */
  now?: () => number;
}

/**
 * Checks the HS256 JWT GitLab signs with the shared API secret (iss `gitlab`, aud `gitlab-kas`,
 * `exp` and `iat` required, lifetime at most {@link GITLAB_JWT_MAX_LIFETIME_SEC}); the one check
 * of both fronts of the API port, HTTP and gRPC. Throws ApiAuthError with a reason safe to
 * return (it never echoes the token).
 */
export function createGitLabJwtVerifier(secret: Uint8Array, options: GitLabJwtOptions = {}) {
  const source = options.source ?? `${GITLAB_REQUEST_HEADER} header`;
  const issuer = options.issuer === undefined ? GITLAB_JWT_ISSUER : options.issuer;
  return async (token: string | string[] | undefined): Promise<void> => {
    if (typeof token !== "string" || token === "") throw new ApiAuthError(`missing ${source}`);
    try {
      await verifyShortLivedJwt(token, secret, {
        audience: GITLAB_JWT_AUDIENCE,
        ...(issuer !== null && { issuer }),
        maxLifetimeSec: GITLAB_JWT_MAX_LIFETIME_SEC,
        clockToleranceSec: GITLAB_JWT_CLOCK_TOLERANCE_SEC,
        ...(options.now && { now: options.now }),
      });
    } catch (err) {
      throw new ApiAuthError(`invalid JWT in the ${source}: ${describeJwtError(err)}`);
    }
  };
}
