import { errors, jwtVerify } from "jose";

/** Header GitLab puts its JWT in when it calls kas (the same name kas uses toward GitLab). */
export const GITLAB_REQUEST_HEADER = "gitlab-kas-api-request";
export const GITLAB_JWT_ISSUER = "gitlab";
export const GITLAB_JWT_AUDIENCE = "gitlab-kas";

export class ApiAuthError extends Error {
  override name = "ApiAuthError";
}

export interface GitLabJwtOptions {
  clockToleranceSec?: number;
  /**
   * The `iss` required; default `gitlab`. `null`: any. GitLab's gRPC client signs with its host
   * name as issuer (Gitlab::Kas::Client), which kas cannot know, so over gRPC only the audience,
   * the signature and the times are checked, as the reference kas does.
   */
  issuer?: string | null;
  /** Where the token came from, for the reasons given (default: the `Gitlab-Kas-Api-Request` header). */
  source?: string;
}

/**
 * Checks the HS256 JWT GitLab signs with the shared API secret (iss `gitlab`, aud `gitlab-kas`);
 * throws ApiAuthError with a reason safe to return (it never echoes the token).
 */
export function createGitLabJwtVerifier(secret: Uint8Array, options: GitLabJwtOptions = {}) {
  const source = options.source ?? `${GITLAB_REQUEST_HEADER} header`;
  const issuer = options.issuer === undefined ? GITLAB_JWT_ISSUER : options.issuer;
  return async (token: string | string[] | undefined): Promise<void> => {
    if (typeof token !== "string" || token === "") throw new ApiAuthError(`missing ${source}`);
    try {
      await jwtVerify(token, secret, {
        algorithms: ["HS256"],
        ...(issuer !== null && { issuer }),
        audience: GITLAB_JWT_AUDIENCE,
        clockTolerance: options.clockToleranceSec ?? 5,
      });
    } catch (err) {
      throw new ApiAuthError(`invalid JWT in the ${source}: ${describe(err)}`);
    }
  };
}

function describe(err: unknown): string {
  if (err instanceof errors.JWTExpired) return "expired";
  if (err instanceof errors.JWTClaimValidationFailed) return `claim ${err.claim} invalid`;
  if (err instanceof errors.JWSSignatureVerificationFailed) return "bad signature";
  if (err instanceof errors.JOSEAlgNotAllowed) return "algorithm not allowed";
  return "malformed";
}
