// The check behind every HS256 JWT kas accepts, one claim rule at a time and at each rule's edge:
// a token one second past a bound is refused, one at the bound is not.
import { errors, SignJWT } from "jose";
import { describe, expect, test } from "vitest";
import { describeJwtError, type ShortLivedJwtRules, verifyShortLivedJwt } from "../../lib/jwt/short-lived.ts";

const SECRET = new TextEncoder().encode("0123456789abcdef0123456789abcdef");
const NOW = 1_700_000_000; // seconds
const rules: ShortLivedJwtRules = {
  audience: "gitlab-kas",
  issuer: "gitlab",
  maxLifetimeSec: 60,
  clockToleranceSec: 5,
  now: () => NOW * 1000 + 999, // within the second: the checks count whole seconds
};

interface Claims {
  aud?: string;
  iss?: string;
  iat?: number;
  exp?: number;
  nbf?: number;
}

function sign(claims: Claims, { alg = "HS256", secret = SECRET } = {}): Promise<string> {
  const c: Claims = { aud: "gitlab-kas", iss: "gitlab", iat: NOW, exp: NOW + 30, ...claims };
  const jwt = new SignJWT({ ...(c.nbf !== undefined && { nbf: c.nbf }) }).setProtectedHeader({ alg });
  if (c.aud !== undefined) jwt.setAudience(c.aud);
  if (c.iss !== undefined) jwt.setIssuer(c.iss);
  if (c.iat !== undefined) jwt.setIssuedAt(c.iat);
  if (c.exp !== undefined) jwt.setExpirationTime(c.exp);
  return jwt.sign(secret);
}

/** Why verification refused the token, as describeJwtError words it (or "accepted"). */
async function verdict(token: Promise<string>, r: ShortLivedJwtRules = rules): Promise<string> {
  return verifyShortLivedJwt(await token, SECRET, r).then(
    () => "accepted",
    (err: unknown) => describeJwtError(err),
  );
}

describe("verifyShortLivedJwt", () => {
  test("a token with every claim right is accepted and its claims returned", async () => {
    const payload = await verifyShortLivedJwt(await sign({}), SECRET, rules);
    expect(payload).toMatchObject({ aud: "gitlab-kas", iss: "gitlab", iat: NOW, exp: NOW + 30 });
  });

  test("signature, algorithm, audience and issuer", async () => {
    expect(
      await verdict(sign({}, { secret: new TextEncoder().encode("another secret, 32 bytes long!!") })),
    ).toBe("bad signature");
    expect(await verdict(sign({}, { alg: "HS512" }))).toBe("algorithm not allowed");
    expect(await verdict(sign({ aud: "someone-else" }))).toBe("claim aud invalid");
    expect(await verdict(sign({ iss: "someone-else" }))).toBe("claim iss invalid");
    // No issuer rule: any issuer, as GitLab's gRPC client signs with its host name.
    expect(await verdict(sign({ iss: "gitlab.example.com" }), { ...rules, issuer: undefined })).toBe(
      "accepted",
    );
  });

  test("exp and iat are both required", async () => {
    expect(await verdict(sign({ exp: undefined }))).toBe("claim exp missing");
    expect(await verdict(sign({ iat: undefined }))).toBe("claim iat missing");
  });

  test("expiry counts the clock tolerance: an exp within it passes, one at its edge is expired", async () => {
    expect(await verdict(sign({ iat: NOW - 40, exp: NOW - 4 }))).toBe("accepted");
    expect(await verdict(sign({ iat: NOW - 40, exp: NOW - 5 }))).toBe("expired");
  });

  test("iat and nbf may lie ahead by the tolerance, not one second more", async () => {
    expect(await verdict(sign({ iat: NOW + 5, exp: NOW + 30 }))).toBe("accepted");
    expect(await verdict(sign({ iat: NOW + 6, exp: NOW + 30 }))).toBe("claim iat invalid");
    expect(await verdict(sign({ nbf: NOW + 5 }))).toBe("accepted");
    expect(await verdict(sign({ nbf: NOW + 6 }))).toBe("claim nbf invalid");
  });

  test("a lifetime (exp - iat) of maxLifetimeSec passes; one second longer is refused on exp", async () => {
    expect(await verdict(sign({ iat: NOW, exp: NOW + 60 }))).toBe("accepted");
    const err = await verifyShortLivedJwt(await sign({ iat: NOW, exp: NOW + 61 }), SECRET, rules).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(errors.JWTClaimValidationFailed);
    expect(err).toMatchObject({
      claim: "exp",
      reason: "check_failed",
      message: '"exp" claim too far ahead (lifetime above 60s)',
    });
    expect(describeJwtError(err)).toBe("claim exp invalid");
    // The latest exp a token can have: issued at the tolerance's edge, living the whole lifetime.
    expect(await verdict(sign({ iat: NOW + 5, exp: NOW + 65 }))).toBe("accepted");
    // An old iat does not stretch the bound: jose refuses a token older than the lifetime.
    expect(await verdict(sign({ iat: NOW - 66, exp: NOW - 4 }))).toBe("expired");
  });

  test("without `now` the checks use the real clock", async () => {
    const real = Math.floor(Date.now() / 1000);
    const fresh = await sign({ iat: real, exp: real + 30 });
    expect(await verdict(Promise.resolve(fresh), { ...rules, now: undefined })).toBe("accepted");
    const old = await sign({ iat: NOW, exp: NOW + 30 }); // fine at NOW, long expired today
    expect(await verdict(Promise.resolve(old), { ...rules, now: undefined })).toBe("expired");
  });
});

describe("describeJwtError", () => {
  test("anything that is not a claim, signature or algorithm failure is 'malformed'", async () => {
    expect(await verdict(Promise.resolve("not.a.jwt"))).toBe("malformed");
    expect(describeJwtError(new Error("x"))).toBe("malformed");
    expect(describeJwtError(undefined)).toBe("malformed");
  });
});
