// PeerAuth's rules without replicas around it: what it signs, what it refuses and how it says so,
// and the secret it will work with. peer-auth.test.ts shows the same rules on the private API.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJwt, decodeProtectedHeader, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { PeerAuth, PeerTokenError, readSecretFile } from "../../lib/router/index.ts";

const SECRET = randomBytes(32);
const now = () => Math.floor(Date.now() / 1000);

function token(
  claims: { iss?: string; aud?: string; sub?: string; iat?: number; exp?: number },
  secret = SECRET,
) {
  const jwt = new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer(claims.iss ?? "gitlab-kas")
    .setAudience(claims.aud ?? "gitlab-kas")
    .setIssuedAt(claims.iat ?? now())
    .setExpirationTime(claims.exp ?? now() + 60);
  if (claims.sub !== undefined) jwt.setSubject(claims.sub);
  return jwt.sign(secret);
}

async function refusal(auth: PeerAuth, t: string | Promise<string>): Promise<PeerTokenError> {
  const err = await auth.verify(await t).then(
    () => new Error("expected a refusal"),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PeerTokenError);
  return err as PeerTokenError;
}

describe("PeerAuth", () => {
  test("signs an HS256 JWT for the subject: issuer and audience gitlab-kas, 60 s to live", async () => {
    const auth = new PeerAuth({ secret: SECRET });
    const t = await auth.sign("replica-a");
    expect(decodeProtectedHeader(t)).toEqual({ alg: "HS256", typ: "JWT" });
    const claims = decodeJwt(t);
    expect(claims).toMatchObject({ iss: "gitlab-kas", aud: "gitlab-kas", sub: "replica-a" });
    expect(claims.exp! - claims.iat!).toBe(60);
    expect(Math.abs(claims.iat! - now())).toBeLessThanOrEqual(1);
    expect(await auth.verify(t)).toBe("replica-a");
  });

  test("its own issuer, audience and lifetime go into what it signs and what it accepts", async () => {
    const own = new PeerAuth({ secret: SECRET, issuer: "kas-i", audience: "kas-a", tokenTtlSec: 30 });
    const t = await own.sign("r");
    expect(decodeJwt(t)).toMatchObject({ iss: "kas-i", aud: "kas-a" });
    expect(decodeJwt(t).exp! - decodeJwt(t).iat!).toBe(30);
    expect(await own.verify(t)).toBe("r");
    const standard = new PeerAuth({ secret: SECRET });
    expect((await refusal(standard, t)).message).toBe("claim iss invalid");
    expect((await refusal(own, token({ iss: "kas-i" }))).message).toBe("claim aud invalid");
  });

  test("each refusal says why in words safe to log, with jose's error as the cause", async () => {
    const auth = new PeerAuth({ secret: SECRET });
    const expired = await refusal(auth, token({ iat: now() - 80, exp: now() - 20 }));
    expect(expired.message).toBe("expired token");
    expect(expired.name).toBe("PeerTokenError");
    expect(expired.cause).toBeInstanceOf(Error);
    expect((await refusal(auth, "not-a-token")).message).toBe("malformed token");
    expect((await refusal(auth, token({}, randomBytes(32)))).message).toBe("bad signature");
    expect((await refusal(auth, token({ aud: "gitlab" }))).message).toBe("claim aud invalid");
  });

  test("a token without a subject names the empty subject", async () => {
    expect(await new PeerAuth({ secret: SECRET }).verify(await token({}))).toBe("");
  });

  test("by default a lifetime of 90 s is accepted, 91 s is not; 5 s of clock skew is tolerated", async () => {
    const auth = new PeerAuth({ secret: SECRET });
    const t = now();
    expect(await auth.verify(await token({ iat: t, exp: t + 90, sub: "s" }))).toBe("s");
    expect((await refusal(auth, token({ iat: t, exp: t + 91 }))).message).toBe("claim exp invalid");
    expect(await auth.verify(await token({ iat: t + 3, exp: t + 60, sub: "s" }))).toBe("s");
    expect((await refusal(auth, token({ iat: t + 30, exp: t + 60 }))).message).toBe("claim iat invalid");
    const strict = new PeerAuth({ secret: SECRET, clockToleranceSec: 0, maxTokenLifetimeSec: 60 });
    expect((await refusal(strict, token({ iat: t + 3, exp: t + 60 }))).message).toBe("claim iat invalid");
    expect((await refusal(strict, token({ iat: t, exp: t + 61 }))).message).toBe("claim exp invalid");
  });

  test("refuses a secret under 32 bytes, and a lifetime it would itself refuse", () => {
    expect(() => new PeerAuth({ secret: randomBytes(31) })).toThrow(
      new Error("peer secret must be at least 32 bytes, got 31"),
    );
    expect(() => new PeerAuth({ secret: SECRET, tokenTtlSec: 91 })).toThrow(
      new Error("peer token lifetime 91s is above the 90s accepted"),
    );
    expect(() => new PeerAuth({ secret: SECRET, tokenTtlSec: 90 })).not.toThrow();
    expect(() => new PeerAuth({ secret: SECRET, tokenTtlSec: 20, maxTokenLifetimeSec: 10 })).toThrow(
      "peer token lifetime 20s is above the 10s accepted",
    );
  });
});

describe("readSecretFile", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "peer-secret-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));
  const file = async (name: string, text: string) => {
    await writeFile(join(dir, name), text);
    return join(dir, name);
  };

  test("base64 in either alphabet, padded or not, whitespace around it ignored", async () => {
    const bytes = Buffer.from(Array.from({ length: 33 }, (_, i) => 0xf8 + (i % 8)));
    expect(
      Buffer.from(await readSecretFile(await file("std", `\n ${bytes.toString("base64")}\t\n`))),
    ).toEqual(bytes);
    expect(Buffer.from(await readSecretFile(await file("url", bytes.toString("base64url"))))).toEqual(bytes);
    const padded = randomBytes(32);
    expect(padded.toString("base64")).toMatch(/=$/);
    expect(Buffer.from(await readSecretFile(await file("pad", padded.toString("base64"))))).toEqual(padded);
  });

  test("anything else is refused, naming the file; so is a short secret", async () => {
    const b64 = randomBytes(32).toString("base64");
    for (const [name, text] of [
      ["inner-space", `${b64.slice(0, 10)} ${b64.slice(10)}`],
      ["three-pad", `${b64.replace(/=*$/, "")}===`],
      ["pad-inside", `ab=${b64}`],
      ["empty", "\n"],
      ["other-char", `${b64}!`],
      ["lead-char", `!${b64}`],
    ] as const) {
      const path = await file(name, text);
      await expect(readSecretFile(path), name).rejects.toThrow(
        new Error(`secret file ${path} is not base64`),
      );
    }
    const short = await file("short", randomBytes(31).toString("base64"));
    await expect(readSecretFile(short)).rejects.toThrow(
      new Error(`secret file ${short} must be at least 32 bytes, got 31`),
    );
  });
});
