// GitLab's JWT on the API port (8153): a token without an end, or one that ends in a hundred years,
// is refused on both fronts, HTTP/JSON and gRPC, by the one verifier they share. A real kas in this
// process; GitLab's side is plain fetch and a grpc-js client built from the .proto files.
import * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGitLabJwtVerifier, GITLAB_JWT_AUDIENCE, GITLAB_JWT_ISSUER } from "../../cmd/kas/api/index.ts";
import { AGENT_ID } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { bearer, gitlabServiceClients, grpcTarget, unary } from "../support/gitlab-grpc.ts";

/** The bound kas applies (a little above GitLab's 60 s) and the skew it tolerates. */
const MAX_LIFETIME = 90;
const TOLERANCE = 5;
const HUNDRED_YEARS = 100 * 365 * 24 * 3600;

interface Claims {
  iss?: string;
  aud?: string;
  iat?: number;
  nbf?: number;
  exp?: number;
}

/** An HS256 JWT with exactly these claims (none added). */
function sign(secret: Uint8Array, claims: Claims, alg = "HS256"): Promise<string> {
  return new SignJWT({ ...claims }).setProtectedHeader({ alg }).sign(secret);
}

/** An unsecured JWT (`alg: none`, no signature). */
function unsecured(claims: Claims): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
}

const nowSec = () => Math.floor(Date.now() / 1000);

/** What GitLab sends (JSONWebToken::Token): iat now, nbf 5 s back, exp 60 s ahead. */
function gitlabClaims(overrides: Claims = {}): Claims {
  const now = nowSec();
  return {
    iss: GITLAB_JWT_ISSUER,
    aud: GITLAB_JWT_AUDIENCE,
    iat: now,
    nbf: now - 5,
    exp: now + 60,
    ...overrides,
  };
}

/** Tokens every front must refuse, by what is wrong with them. */
async function refusedTokens(secret: Uint8Array): Promise<Record<string, string>> {
  const now = nowSec();
  const { exp: _exp, ...noExp } = gitlabClaims();
  const { iat: _iat, ...noIat } = gitlabClaims();
  return {
    "no exp": await sign(secret, noExp),
    "no iat": await sign(secret, noIat),
    "exp in 100 years": await sign(secret, gitlabClaims({ exp: now + HUNDRED_YEARS })),
    "exp in 100 years, iat as far": await sign(
      secret,
      gitlabClaims({ iat: now + HUNDRED_YEARS - 60, nbf: now - 5, exp: now + HUNDRED_YEARS }),
    ),
    "iat in the future": await sign(secret, gitlabClaims({ iat: now + 600, exp: now + 660 })),
    "lifetime just above the bound": await sign(secret, gitlabClaims({ exp: now + MAX_LIFETIME + 2 })),
    "issued long ago, still unexpired": await sign(secret, gitlabClaims({ iat: now - 3600, exp: now + 30 })),
    expired: await sign(secret, gitlabClaims({ iat: now - 120, exp: now - 60 })),
    "wrong aud": await sign(secret, gitlabClaims({ aud: "gitlab" })),
    "alg HS384": await sign(secret, gitlabClaims(), "HS384"),
    "alg none": unsecured(gitlabClaims()),
    "wrong secret": await sign(new Uint8Array(32).fill(9), gitlabClaims()),
  };
}

describe("GitLab's JWT on the API port: exp required and bounded, on HTTP and gRPC alike", () => {
  let kas: InProcessKas;
  let tracker: grpc.Client;

  beforeAll(async () => {
    kas = await startInProcessKas();
    const clients = gitlabServiceClients();
    tracker = new clients.AgentTracker(grpcTarget(kas.addresses.api!), grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    tracker?.close();
    await kas?.close();
  });

  const overHttp = async (token: string): Promise<number> => {
    const res = await fetch(`${kas.addresses.api}/api/v1/agents`, {
      headers: { "gitlab-kas-api-request": token },
    });
    await res.arrayBuffer();
    return res.status;
  };
  /** The call's gRPC status code (OK when it succeeds). */
  const overGrpc = (token: string): Promise<number> =>
    unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids: [AGENT_ID] }, bearer(token)).then(
      () => grpc.status.OK,
      (err: grpc.ServiceError) => err.code,
    );

  it("accepts what GitLab sends (60 s, nbf 5 s back), and a lifetime at the bound", async () => {
    const now = nowSec();
    expect(await overHttp(await sign(kas.apiSecret, gitlabClaims()))).toBe(200);
    expect(await overHttp(await sign(kas.apiSecret, gitlabClaims({ exp: now + MAX_LIFETIME })))).toBe(200);
    // Over gRPC GitLab signs with its host name as issuer (Gitlab::Kas::Client#token).
    const host = gitlabClaims({ iss: "gitlab.example.com" });
    expect(await overGrpc(await sign(kas.apiSecret, host))).toBe(grpc.status.OK);
    expect(await overGrpc(await sign(kas.apiSecret, { ...host, exp: now + MAX_LIFETIME }))).toBe(
      grpc.status.OK,
    );
  });

  it("HTTP: 401 for a token without exp or iat, one ending in 100 years, issued in the future, or otherwise wrong", async () => {
    const tokens = await refusedTokens(kas.apiSecret);
    tokens["wrong iss"] = await sign(kas.apiSecret, gitlabClaims({ iss: "gitlab-kas" }));
    const got = Object.fromEntries(
      await Promise.all(Object.entries(tokens).map(async ([why, t]) => [why, await overHttp(t)] as const)),
    );
    expect(got).toEqual(Object.fromEntries(Object.keys(tokens).map((why) => [why, 401])));
  });

  it("gRPC: UNAUTHENTICATED for the same tokens", async () => {
    const tokens = await refusedTokens(kas.apiSecret);
    const got = Object.fromEntries(
      await Promise.all(Object.entries(tokens).map(async ([why, t]) => [why, await overGrpc(t)] as const)),
    );
    expect(got).toEqual(
      Object.fromEntries(Object.keys(tokens).map((why) => [why, grpc.status.UNAUTHENTICATED])),
    );
  });
});

describe("the verifier over claim sets (fast-check)", () => {
  const secret = new Uint8Array(32).fill(3);
  const NOW = Math.floor(Date.now() / 1000);
  const verifiers = {
    http: createGitLabJwtVerifier(secret, { now: () => NOW * 1000 }),
    grpc: createGitLabJwtVerifier(secret, { issuer: null, now: () => NOW * 1000 }),
  };
  /** A time near now (where the bounds are) or very far either way. */
  const time = fc.option(
    fc.oneof(
      fc.integer({ min: -200, max: 200 }).map((d) => NOW + d),
      fc.integer({ min: -HUNDRED_YEARS, max: HUNDRED_YEARS }).map((d) => NOW + d),
    ),
    { nil: undefined },
  );
  const iss = fc.constantFrom(GITLAB_JWT_ISSUER, "gitlab.example.com", "gitlab-kas");
  const aud = fc.oneof(
    { arbitrary: fc.constant(GITLAB_JWT_AUDIENCE), weight: 3 },
    { arbitrary: fc.constant("gitlab"), weight: 1 },
  );
  /** Any mix of the claims. */
  const anyClaims = fc.record({ iss, aud, iat: time, nbf: time, exp: time }, { requiredKeys: ["aud"] });
  /** Shaped as GitLab signs (nbf 5 s before iat), issued around now, living about a minute. */
  const gitlabLike = fc
    .record({
      iss,
      aud,
      iat: fc.integer({ min: -120, max: 20 }).map((d) => NOW + d),
      lifetime: fc.integer({ min: -10, max: 150 }),
    })
    .map(({ lifetime, ...c }): Claims => ({ ...c, nbf: c.iat - 5, exp: c.iat + lifetime }));
  const claims = fc.oneof(gitlabLike, anyClaims);
  const accepts = (verify: (t: string) => Promise<void>, token: string) =>
    verify(token).then(
      () => true,
      () => false,
    );

  it("accepts exactly the tokens GitLab could have sent in the last minute and a half", async () => {
    const seen = { accepted: 0, refused: 0 };
    await fc.assert(
      fc.asyncProperty(claims, async (c) => {
        const token = await sign(secret, stripUndefined(c));
        const { iat, exp, nbf } = c;
        const timely =
          iat !== undefined &&
          exp !== undefined &&
          exp > NOW - TOLERANCE && // not expired
          (nbf === undefined || nbf <= NOW + TOLERANCE) &&
          iat <= NOW + TOLERANCE && // not issued in the future
          NOW - iat - TOLERANCE <= MAX_LIFETIME &&
          exp - iat <= MAX_LIFETIME &&
          exp - NOW <= MAX_LIFETIME + TOLERANCE;
        const addressed = c.aud === GITLAB_JWT_AUDIENCE;
        const ok = await accepts(verifiers.grpc, token);
        expect(ok).toBe(timely && addressed);
        expect(await accepts(verifiers.http, token)).toBe(timely && addressed && c.iss === GITLAB_JWT_ISSUER);
        seen[ok ? "accepted" : "refused"]++;
      }),
      { numRuns: 500 },
    );
    // The claim sets drawn reach both sides of the bounds, not only the refusals.
    expect(seen.accepted).toBeGreaterThan(10);
    expect(seen.refused).toBeGreaterThan(10);
  });

  it("whatever it accepts ends, and soon", async () => {
    await fc.assert(
      fc.asyncProperty(claims, async (c) => {
        const token = await sign(secret, stripUndefined(c));
        if (!(await accepts(verifiers.grpc, token))) return;
        expect(c.exp).toBeDefined();
        expect(c.exp! - NOW).toBeLessThanOrEqual(MAX_LIFETIME + TOLERANCE);
        expect(c.exp! - c.iat!).toBeLessThanOrEqual(MAX_LIFETIME);
      }),
      { numRuns: 500 },
    );
  });
});

function stripUndefined(c: Claims): Claims {
  return Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)) as Claims;
}
