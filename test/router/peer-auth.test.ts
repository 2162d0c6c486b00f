import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PeerAuth, PeerRejectedError, readSecretFile } from "../../lib/router/index.ts";
import type { TunnelClient } from "../../lib/tunnel/session/index.ts";
import { dial, HandshakeError } from "../../lib/tunnel/transport/index.ts";
import { RedisServer } from "../support/redis-server.ts";
import { ask, type Replica, SECRET, startAgent, startReplica } from "./harness.ts";

const sign = (
  secret: Uint8Array,
  claims: { iss?: string; aud?: string; exp?: number; iat?: number } = {},
): Promise<string> => {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer(claims.iss ?? "gitlab-kas")
    .setAudience(claims.aud ?? "gitlab-kas")
    .setSubject("tester")
    .setIssuedAt(claims.iat ?? now)
    .setExpirationTime(claims.exp ?? now + 60)
    .sign(secret);
};

describe("peer authentication", () => {
  let redis: RedisServer;
  let a: Replica;
  let b: Replica;
  let agent: TunnelClient;

  beforeAll(async () => {
    redis = await RedisServer.start({ unixSocket: true });
    [a, b] = await Promise.all(["a", "b"].map((n) => startReplica(n, redis)));
    agent = startAgent(a, "801");
    await agent.ready(5000);
  });
  afterAll(async () => {
    await agent?.close(100);
    await Promise.all([a, b].map((r) => r.close()));
    await redis.close();
  });

  const attempt = async (token: string | undefined) => {
    const headers: Record<string, string> = token === undefined ? {} : { Authorization: `Bearer ${token}` };
    try {
      const conn = await dial(a.router.privateUrl, { headers });
      conn.close();
      return 101;
    } catch (err) {
      if (err instanceof HandshakeError) return err.status;
      throw err;
    }
  };

  it("accepts a fresh token signed with the shared secret", async () => {
    expect(await attempt(await sign(SECRET))).toBe(101);
  });

  it("rejects forged, expired, wrong-issuer, wrong-audience and missing tokens with 401", async () => {
    const past = Math.floor(Date.now() / 1000) - 600;
    expect(await attempt(await sign(randomBytes(32)))).toBe(401);
    expect(await attempt(await sign(SECRET, { iat: past, exp: past + 60 }))).toBe(401);
    expect(await attempt(await sign(SECRET, { iss: "someone-else" }))).toBe(401);
    expect(await attempt(await sign(SECRET, { aud: "gitlab" }))).toBe(401);
    expect(await attempt(undefined)).toBe(401);
    expect(await attempt("not.a.jwt")).toBe(401);
  });

  it("rejects tokens without an end or with an end far away (401): replicas sign a fresh 60 s one per dial", async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: "gitlab-kas", aud: "gitlab-kas", sub: "tester" };
    const raw = (extra: object) =>
      new SignJWT({ ...claims, ...extra }).setProtectedHeader({ alg: "HS256" }).sign(SECRET);
    expect(await attempt(await raw({ iat: now }))).toBe(401); // no exp
    expect(await attempt(await raw({ exp: now + 60 }))).toBe(401); // no iat
    expect(await attempt(await sign(SECRET, { iat: now, exp: now + 100 * 365 * 24 * 3600 }))).toBe(401);
    expect(await attempt(await sign(SECRET, { iat: now + 600, exp: now + 660 }))).toBe(401); // issued in the future
    expect(await attempt(await sign(SECRET, { iat: now, exp: now + 92 }))).toBe(401); // above the 90 s bound
    expect(await attempt(await sign(SECRET, { iat: now, exp: now + 90 }))).toBe(101);
  });

  it("a replica with the wrong secret gets PeerRejectedError, not a timeout", async () => {
    const rogue = await startReplica("rogue", redis, { auth: { secret: randomBytes(32) } });
    try {
      expect(await ask(b.router, "801")).toBe("801\nping"); // the agent is reachable
      const start = Date.now();
      const err = await ask(rogue.router, "801", "x", 3000).catch((e) => e);
      expect(err).toBeInstanceOf(PeerRejectedError);
      expect(err.status).toBe(401);
      expect(Date.now() - start).toBeLessThan(1000);
    } finally {
      await rogue.close();
    }
  });

  it("reads a base64 secret file and refuses short secrets", async () => {
    const dir = await mkdtemp(join(tmpdir(), "peer-secret-"));
    try {
      await writeFile(join(dir, "ok"), `${SECRET.toString("base64")}\n`);
      await writeFile(join(dir, "short"), randomBytes(16).toString("base64"));
      const secret = await readSecretFile(join(dir, "ok"));
      expect(Buffer.from(secret).equals(SECRET)).toBe(true);
      await expect(readSecretFile(join(dir, "short"))).rejects.toThrow("at least 32 bytes");
      const auth = new PeerAuth({ secret });
      expect(await auth.verify(await auth.sign("me"))).toBe("me");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
