// The proxy's credential parsing (ci:/pat: bearer tokens, the session cookie), by property: every
// well-formed value round-trips, and anything else is a 401 that never echoes the secret.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { ProxyAccessError } from "../../../../modules/kubernetes_api/kas/access.ts";
import {
  CREDENTIAL_HEADERS,
  parseAuthorization,
  parseProxyCredentials,
} from "../../../../modules/kubernetes_api/kas/credentials.ts";
import { cookieValue } from "../../../../tool/http/serve/index.ts";

const agentIds = fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String);
/** Tokens as GitLab issues them: no whitespace (":" allowed: only the first two separate). */
const secrets = fc.stringMatching(/^[A-Za-z0-9_\-.:+/=]{1,60}$/);

function refusal(f: () => unknown): ProxyAccessError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(ProxyAccessError);
    return err as ProxyAccessError;
  }
  throw new Error("expected a refusal");
}

describe("parseAuthorization", () => {
  test("Bearer ci:<agent id>:<job token> and pat:<agent id>:<token> round-trip", () => {
    fc.assert(
      fc.property(fc.constantFrom("ci", "pat"), agentIds, secrets, (type, agentId, secret) => {
        const parsed = parseAuthorization(`Bearer ${type}:${agentId}:${secret}`);
        expect(parsed).toEqual(
          type === "ci"
            ? { kind: "ci_job", agentId, jobToken: secret }
            : { kind: "personal_access_token", agentId, token: secret },
        );
      }),
    );
  });

  test("other bearer tokens are static agent tokens", () => {
    fc.assert(
      fc.property(
        secrets.filter((s) => !/^(ci|pat):/.test(s)),
        (token) => {
          expect(parseAuthorization(`Bearer ${token}`)).toEqual({ kind: "agent_token", token });
        },
      ),
    );
  });

  test("a bad agent id or an empty token: 401, without the token in the message", () => {
    const badIds = fc.oneof(
      fc.constantFrom("", "0", "-1", "01", "9223372036854775808", "1e3", " 1", "abc"),
      fc.stringMatching(/^[^:\s]{0,20}$/).filter((s) => !/^[1-9]\d{0,18}$/.test(s)),
    );
    fc.assert(
      fc.property(fc.constantFrom("ci", "pat"), badIds, secrets, (type, id, secret) => {
        const err = refusal(() => parseAuthorization(`Bearer ${type}:${id}:SECRET${secret}`));
        expect(err.status).toBe(401);
        expect(err.message).not.toContain("SECRET");
      }),
    );
    for (const value of [
      "Bearer ci:42:",
      "Bearer pat:42",
      "Bearer ci:",
      "Basic abc",
      "Bearer",
      "Bearer a b",
    ]) {
      expect(refusal(() => parseAuthorization(value)).status).toBe(401);
    }
  });

  test("any header value: a credential or a 401, nothing else", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (value) => {
        try {
          const parsed = parseAuthorization(value);
          expect(["ci_job", "personal_access_token", "agent_token"]).toContain(parsed.kind);
        } catch (err) {
          expect(err).toBeInstanceOf(ProxyAccessError);
          expect((err as ProxyAccessError).status).toBe(401);
        }
      }),
    );
  });
});

describe("the session cookie", () => {
  test("_gitlab_kas (URL-escaped, among other cookies) with Gitlab-Agent-Id and X-Csrf-Token", () => {
    fc.assert(
      fc.property(agentIds, fc.string({ minLength: 1, maxLength: 40 }), secrets, (agentId, session, csrf) => {
        const cookie = `a=1; _gitlab_kas=${encodeURIComponent(session)}; b=2`;
        expect(parseProxyCredentials({ cookie, "gitlab-agent-id": agentId, "x-csrf-token": csrf })).toEqual({
          kind: "session_cookie",
          agentId,
          cookie: session,
          csrfToken: csrf,
        });
      }),
    );
  });

  test("without the agent id or the CSRF token: 401; Authorization wins over the cookie", () => {
    const cookie = "_gitlab_kas=s";
    expect(refusal(() => parseProxyCredentials({ cookie, "x-csrf-token": "c" })).status).toBe(401);
    expect(refusal(() => parseProxyCredentials({ cookie, "gitlab-agent-id": "42" })).status).toBe(401);
    expect(
      refusal(() => parseProxyCredentials({ cookie, "gitlab-agent-id": "4 2", "x-csrf-token": "c" })).status,
    ).toBe(401);
    expect(refusal(() => parseProxyCredentials({})).status).toBe(401);
    expect(
      parseProxyCredentials({
        authorization: "Bearer ci:1:t",
        cookie,
        "gitlab-agent-id": "42",
        "x-csrf-token": "c",
      }),
    ).toMatchObject({ kind: "ci_job" });
  });

  test("cookieValue finds exactly the named cookie", () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z_]{1,10}$/),
        fc.stringMatching(/^[A-Za-z0-9%]{0,20}$/),
        (name, value) => {
          expect(cookieValue(`x${name}=no; ${name}=${value}; ${name}x=no`, name)).toBe(value);
        },
      ),
    );
  });
});

// Each rule by example, with the message it answers: the properties above check that a refusal is
// a 401, these that each refusal happens for its own reason and says which.
describe("each rule, at its edge", () => {
  const said = (f: () => unknown) => refusal(f).message;

  test("the headers that carry GitLab credentials, never passed to the cluster", () => {
    expect([...CREDENTIAL_HEADERS].sort()).toEqual([
      "authorization",
      "cookie",
      "gitlab-agent-id",
      "x-csrf-token",
    ]);
  });

  test("Authorization: exactly 'Bearer <token>', the scheme first and nothing after the token", () => {
    const expected = 'expected "Authorization: Bearer <token>"';
    for (const value of [
      "Basic x Bearer tok",
      "xBearer tok",
      "Bearer a\nb",
      "Bearer a b",
      "Bearer ",
      "Token t",
    ])
      expect(
        said(() => parseAuthorization(value)),
        JSON.stringify(value),
      ).toBe(expected);
    expect(parseAuthorization("bearer tok")).toEqual({ kind: "agent_token", token: "tok" });
  });

  test("only a token that starts with ci: or pat: is typed; the prefix anywhere else is part of a static token", () => {
    expect(parseAuthorization("Bearer xci:5:tok")).toEqual({ kind: "agent_token", token: "xci:5:tok" });
    expect(parseAuthorization("Bearer a-pat:5:tok")).toEqual({ kind: "agent_token", token: "a-pat:5:tok" });
  });

  test("a typed token names its own form when incomplete, and each part when wrong", () => {
    expect(said(() => parseAuthorization("Bearer ci:5"))).toBe(
      "Authorization: expected ci:<agent id>:<token>",
    );
    expect(said(() => parseAuthorization("Bearer pat:5"))).toBe(
      "Authorization: expected pat:<agent id>:<token>",
    );
    expect(said(() => parseAuthorization("Bearer ci::tok"))).toBe(
      "Authorization: the agent id must be a positive integer",
    );
    expect(said(() => parseAuthorization("Bearer pat:05:tok"))).toBe(
      "Authorization: the agent id must be a positive integer",
    );
    expect(said(() => parseAuthorization("Bearer pat:9223372036854775808:tok"))).toBe(
      "Authorization: the agent id must be a positive integer",
    );
    expect(said(() => parseAuthorization("Bearer ci:5:"))).toBe("Authorization: empty token");
    expect(parseAuthorization("Bearer pat:9223372036854775807:t:u")).toEqual({
      kind: "personal_access_token",
      agentId: "9223372036854775807",
      token: "t:u",
    });
  });

  test("no credentials at all: the 401 says which forms are accepted", () => {
    expect(said(() => parseProxyCredentials({ cookie: "other=1" }))).toBe(
      'expected "Authorization: Bearer ci:<agent id>:<job token>", "Bearer pat:<agent id>:<token>" or the _gitlab_kas session cookie',
    );
  });

  test("the session cookie: rack's escaping undone ('+' is a space), empty or undecodable refused", () => {
    const headers = { "gitlab-agent-id": " 42 ", "x-csrf-token": "c" };
    expect(parseProxyCredentials({ ...headers, cookie: "_gitlab_kas=a+b%2Bc" })).toEqual({
      kind: "session_cookie",
      agentId: "42",
      cookie: "a b+c",
      csrfToken: "c",
    });
    expect(said(() => parseProxyCredentials({ ...headers, cookie: "_gitlab_kas=" }))).toBe(
      "the _gitlab_kas cookie is empty",
    );
    expect(said(() => parseProxyCredentials({ ...headers, cookie: "_gitlab_kas=%E0%A4%A" }))).toBe(
      "the _gitlab_kas cookie is not valid",
    );
  });

  test("the session's agent id and CSRF token: one value each, the id a positive integer", () => {
    const cookie = "_gitlab_kas=s";
    expect(said(() => parseProxyCredentials({ cookie, "x-csrf-token": "c" }))).toBe(
      "Gitlab-Agent-Id: expected exactly one value",
    );
    expect(said(() => parseProxyCredentials({ cookie, "gitlab-agent-id": "1", "x-csrf-token": "" }))).toBe(
      "X-Csrf-Token: expected exactly one value",
    );
    expect(said(() => parseProxyCredentials({ cookie, "gitlab-agent-id": "1" }))).toBe(
      "X-Csrf-Token: expected exactly one value",
    );
    expect(said(() => parseProxyCredentials({ cookie, "gitlab-agent-id": "0", "x-csrf-token": "c" }))).toBe(
      "Gitlab-Agent-Id: the agent id must be a positive integer",
    );
  });
});
