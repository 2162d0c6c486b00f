import { errors, jwtVerify } from "jose";

/** Header GitLab puts its JWT in when it calls kas (the same name kas uses toward GitLab). */
export const GITLAB_REQUEST_HEADER = "gitlab-kas-api-request";
export const GITLAB_JWT_ISSUER = "gitlab";
export const GITLAB_JWT_AUDIENCE = "gitlab-kas";

export class ApiAuthError extends Error {
  override name = "ApiAuthError";
}

/**
 * Checks the HS256 JWT GitLab signs with the shared API secret (iss `gitlab`, aud `gitlab-kas`);
 * throws ApiAuthError with a reason safe to return (it never echoes the token).
 */
export function createGitLabJwtVerifier(secret: Uint8Array, options: { clockToleranceSec?: number } = {}) {
  return async (header: string | string[] | undefined): Promise<void> => {
    if (typeof header !== "string" || header === "") {
      throw new ApiAuthError(`missing ${GITLAB_REQUEST_HEADER} header`);
    }
    try {
      await jwtVerify(header, secret, {
        algorithms: ["HS256"],
        issuer: GITLAB_JWT_ISSUER,
        audience: GITLAB_JWT_AUDIENCE,
        clockTolerance: options.clockToleranceSec ?? 5,
      });
    } catch (err) {
      throw new ApiAuthError(`invalid ${GITLAB_REQUEST_HEADER} JWT: ${describe(err)}`);
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
