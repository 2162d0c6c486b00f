import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";

/** Header GitLab's internal API reads kas's JWT from. */
export const KAS_API_REQUEST_HEADER = "Gitlab-Kas-Api-Request";
export const KAS_JWT_ISSUER = "gitlab-kas";
export const KAS_JWT_AUDIENCE = "gitlab";

export interface KasJwtOptions {
  /**
   * Lifetime in seconds from `iat`. Default 30, as GitLab's kas signs it (`jwtValidFor`): a fresh
   * token per request, so it only needs to outlive the request.
   */
  ttlSeconds?: number;
  /** Seconds of clock skew tolerated by backdating `nbf` (GitLab's kas: `jwtNotBefore`, 5). Default 5. */
  skewSeconds?: number;
  /** Current time in ms. Default `Date.now`. */
  now?: () => number;
}

/** A fresh HS256 JWT (iss gitlab-kas, aud gitlab) proving to GitLab that the request comes from kas. */
export function signKasApiJwt(secret: Uint8Array, options: KasJwtOptions = {}): Promise<string> {
  const nowSeconds = Math.floor((options.now ?? Date.now)() / 1000);
  const skew = options.skewSeconds ?? 5;
  // As GitLab's kas: iat now, nbf backdated by the skew, exp 30 s after iat.
  return new SignJWT({})
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuer(KAS_JWT_ISSUER)
    .setAudience(KAS_JWT_AUDIENCE)
    .setIssuedAt(nowSeconds)
    .setNotBefore(nowSeconds - skew)
    .setExpirationTime(nowSeconds + (options.ttlSeconds ?? 30))
    .setJti(randomUUID())
    .sign(secret);
}
