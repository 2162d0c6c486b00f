// Browser sessions of the dashboard: the configured token, given once on the login page, is
// exchanged for a signed JWT in an HttpOnly, SameSite=Strict cookie. The signing key comes from the
// token and the session generation, so every kas replica with the same pair accepts the cookie, and
// a new token or a new generation ends every session at once. Each session has an id (`jti`): a
// logout records it as revoked (see revocations.ts), since the cookie itself stays valid until it
// expires.
import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { jwtVerify, SignJWT } from "jose";
import { cookieValue, HttpError } from "../../../tool/http/serve/index.ts";
import type { SessionRecord, SessionRevocations } from "./revocations.ts";

export const SESSION_COOKIE = "kas_dashboard_session";
const AUDIENCE = "kas-dashboard";
const ISSUER = "gitlab-kas";

export interface DashboardSessions {
  /** Whether `given` is the token (constant time). */
  tokenMatches(given: string): boolean;
  /** A Set-Cookie value holding a new session. */
  issue(): Promise<string>;
  /** A Set-Cookie value that removes the session. */
  readonly clear: string;
  /**
   * The session of the request's cookie: signed by this dashboard's key, not expired, not revoked.
   * Throws a 503 HttpError when revocation cannot be checked (Redis unreachable).
   */
  of(req: IncomingMessage): Promise<SessionRecord | undefined>;
  /** Revokes the session of the request's cookie, if it holds one; rejects if that could not be recorded. */
  revoke(req: IncomingMessage): Promise<void>;
}

export interface SessionOptions {
  ttlMs: number;
  secure: boolean;
  /** Raised by the operator to end every session at once (default 1). */
  generation?: number;
  revocations: SessionRevocations;
}

/** The key that signs the sessions of `token` and `generation`. */
function sessionKey(token: string, generation: number): Buffer {
  return createHmac("sha256", token).update(`kas dashboard session key, generation ${generation}`).digest();
}

export function dashboardSessions(token: string, o: SessionOptions): DashboardSessions {
  const expected = digest(token);
  const key = sessionKey(token, o.generation ?? 1);
  const attributes = `Path=/; HttpOnly; SameSite=Strict${o.secure ? "; Secure" : ""}`;
  /** The session a cookie holds, if this dashboard signed it and it has not expired (revoked or not). */
  const signed = async (req: IncomingMessage): Promise<SessionRecord | undefined> => {
    const jwt = cookieValue(req.headers.cookie, SESSION_COOKIE);
    if (jwt === undefined) return undefined;
    try {
      const { payload } = await jwtVerify(jwt, key, {
        algorithms: ["HS256"],
        issuer: ISSUER,
        audience: AUDIENCE,
        // A session ends with its ttl, whatever a cookie says of itself (5 s for clocks).
        requiredClaims: ["exp", "iat", "jti"],
        maxTokenAge: Math.ceil(o.ttlMs / 1000) + 5,
        clockTolerance: 5,
      });
      const { jti, iat, exp } = payload;
      // Without an id a session could not be revoked: not one of ours.
      if (typeof jti !== "string" || jti === "" || iat === undefined || exp === undefined) return undefined;
      return { id: jti, issuedAtMs: iat * 1000, expiresAtMs: exp * 1000 };
    } catch {
      return undefined;
    }
  };
  return {
    tokenMatches: (given) => timingSafeEqual(digest(given), expected),
    async issue() {
      const jwt = await new SignJWT({})
        .setProtectedHeader({ alg: "HS256" })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setJti(randomUUID())
        .setIssuedAt()
        .setExpirationTime(new Date(Date.now() + o.ttlMs))
        .sign(key);
      return `${SESSION_COOKIE}=${jwt}; ${attributes}; Max-Age=${Math.floor(o.ttlMs / 1000)}`;
    },
    clear: `${SESSION_COOKIE}=; ${attributes}; Max-Age=0`,
    async of(req) {
      const session = await signed(req);
      if (session === undefined) return undefined;
      let revoked: boolean;
      try {
        revoked = await o.revocations.isRevoked(session);
      } catch {
        // Refused rather than let in: it may be a session that logged out on another replica.
        throw new HttpError(503, "cannot tell whether this dashboard session was logged out: try again", {
          "retry-after": "5",
        });
      }
      return revoked ? undefined : session;
    },
    async revoke(req) {
      // Revoked already or not: a logout asked again (after a failed one) must record it again.
      const session = await signed(req);
      if (session === undefined) return;
      try {
        await o.revocations.revoke(session);
      } catch {
        // The cookie is kept (no Set-Cookie on an error): the user can log out again.
        throw new HttpError(503, "the logout could not be recorded for every kas replica: try again", {
          "retry-after": "5",
        });
      }
    },
  };
}

/** Same-length digests, so the comparison says nothing of the token's length either. */
function digest(text: string): Buffer {
  return createHmac("sha256", "kas dashboard token").update(text).digest();
}
