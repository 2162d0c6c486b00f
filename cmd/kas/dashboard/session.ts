// Browser sessions of the dashboard: the configured token, given once on the login page, is
// exchanged for a signed JWT in an HttpOnly, SameSite=Strict cookie. The signing key comes from the
// token, so every kas replica with the same token accepts the cookie, and a new token ends every
// session at once.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { jwtVerify, SignJWT } from "jose";

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
  /** Whether the request carries a valid session cookie. */
  valid(req: IncomingMessage): Promise<boolean>;
}

export function dashboardSessions(token: string, o: { ttlMs: number; secure: boolean }): DashboardSessions {
  const expected = digest(token);
  const key = createHmac("sha256", token).update("kas dashboard session key").digest();
  const attributes = `Path=/; HttpOnly; SameSite=Strict${o.secure ? "; Secure" : ""}`;
  return {
    tokenMatches: (given) => timingSafeEqual(digest(given), expected),
    async issue() {
      const jwt = await new SignJWT({})
        .setProtectedHeader({ alg: "HS256" })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime(new Date(Date.now() + o.ttlMs))
        .sign(key);
      return `${SESSION_COOKIE}=${jwt}; ${attributes}; Max-Age=${Math.floor(o.ttlMs / 1000)}`;
    },
    clear: `${SESSION_COOKIE}=; ${attributes}; Max-Age=0`,
    async valid(req) {
      const jwt = cookieOf(req.headers.cookie, SESSION_COOKIE);
      if (jwt === undefined) return false;
      try {
        await jwtVerify(jwt, key, { algorithms: ["HS256"], issuer: ISSUER, audience: AUDIENCE });
        return true;
      } catch {
        return false;
      }
    },
  };
}

/** Same-length digests, so the comparison says nothing of the token's length either. */
function digest(text: string): Buffer {
  return createHmac("sha256", "kas dashboard token").update(text).digest();
}

/** The value of cookie `name` in a Cookie header (RFC 6265 `name=value; name2=value2`). */
export function cookieOf(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const pair of header.split(";")) {
    const eq = pair.indexOf("=");
    if (eq < 0) continue;
    if (pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim();
  }
  return undefined;
}
