// The one check behind every HS256 JWT kas accepts (GitLab's on the API port, over HTTP and gRPC;
// other replicas' on the private API). These tokens are minted per call and live a minute at most,
// so a token without an end, or with an end far away, is no token a real peer sends: it is a
// credential someone means to keep. jose alone accepts both (no `exp` required, no bound on it).
import { errors, type JWTPayload, jwtVerify } from "jose";

export interface ShortLivedJwtRules {
  /** The `aud` required. */
  audience: string;
  /** The `iss` required; undefined: any (GitLab's gRPC client signs with its host name). */
  issuer?: string;
  /**
   * Longest lifetime accepted, in seconds: `exp - iat` at most this, and so `exp` at most this
   * (plus the tolerance) from now. Set a little above what the signer issues.
   */
  maxLifetimeSec: number;
  /** Clock skew tolerated between signer and verifier, in seconds, on `exp`, `nbf` and `iat`. */
  clockToleranceSec: number;
  /** Current time in ms. Default `Date.now` (tests pin it). */
  now?: () => number;
}

/**
 * Verifies an HS256 JWT and its claims: signature, `aud` (and `iss` when given), `exp` and `iat`
 * both present, not expired, `nbf` and `iat` not in the future, lifetime at most
 * `maxLifetimeSec`. Resolves with the claims; rejects with jose's errors (the bound on the
 * lifetime as a JWTClaimValidationFailed on `exp`, reason `check_failed`).
 */
export async function verifyShortLivedJwt(
  token: string,
  secret: Uint8Array,
  rules: ShortLivedJwtRules,
): Promise<JWTPayload> {
  const nowMs = (rules.now ?? Date.now)();
  const { payload } = await jwtVerify(token, secret, {
    algorithms: ["HS256"],
    audience: rules.audience,
    ...(rules.issuer !== undefined && { issuer: rules.issuer }),
    requiredClaims: ["exp", "iat"],
    // Also makes jose refuse an `iat` in the future (beyond the tolerance): a token cannot be
    // issued later than it is presented, and a future `iat` would stretch the lifetime bound.
    maxTokenAge: rules.maxLifetimeSec,
    clockTolerance: rules.clockToleranceSec,
    currentDate: new Date(nowMs),
  });
  // jose checked both are numbers once present; it bounds neither their distance nor exp's.
  const exp = payload.exp as number;
  const iat = payload.iat as number;
  const nowSec = Math.floor(nowMs / 1000);
  if (exp - iat > rules.maxLifetimeSec || exp - nowSec > rules.maxLifetimeSec + rules.clockToleranceSec) {
    throw new errors.JWTClaimValidationFailed(
      `"exp" claim too far ahead (lifetime above ${rules.maxLifetimeSec}s)`,
      payload,
      "exp",
      "check_failed",
    );
  }
  return payload;
}

/** Why a token was refused, in words safe to return or log (never the token). */
export function describeJwtError(err: unknown): string {
  if (err instanceof errors.JWTExpired) return "expired";
  if (err instanceof errors.JWTClaimValidationFailed)
    return err.reason === "missing" ? `claim ${err.claim} missing` : `claim ${err.claim} invalid`;
  if (err instanceof errors.JWSSignatureVerificationFailed) return "bad signature";
  if (err instanceof errors.JOSEAlgNotAllowed) return "algorithm not allowed";
  return "malformed";
}
