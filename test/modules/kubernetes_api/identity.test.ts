// kas's identity header, as agentk reads it: any identity kas encodes reads back the same; anything
// else (absent, repeated, truncated, forged shapes, any bytes) is refused, never read as "the agent".
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  decodeIdentity,
  encodeIdentity,
  escapeExtraKey,
  IdentityError,
  impersonationHeaders,
  isImpersonationHeader,
  MAX_IDENTITY_LENGTH,
} from "../../../modules/kubernetes_api/identity.ts";

const who = fc.record(
  {
    username: fc.string({ minLength: 1, maxLength: 20 }),
    uid: fc.string({ minLength: 1, maxLength: 10 }),
    groups: fc.array(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 5 }),
    extra: fc.array(
      fc.record({
        key: fc.string({ minLength: 1, maxLength: 20 }),
        val: fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }),
      }),
      { maxLength: 3 },
    ),
  },
  { requiredKeys: ["username", "groups", "extra"] },
);

describe("Kas-Identity", () => {
  test("any identity kas encodes reads back as itself", () => {
    fc.assert(
      fc.property(fc.option(who, { nil: undefined }), (w) => {
        const identity =
          w === undefined ? ({ as: "agent" } as const) : ({ as: "impersonate", who: w } as const);
        expect(decodeIdentity(encodeIdentity(identity))).toEqual(identity);
      }),
    );
  });

  test("any other value is refused with an IdentityError that does not echo it", () => {
    const valid = new Set([encodeIdentity({ as: "agent" })]);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.base64String(),
          fc.json().map((j) => Buffer.from(j).toString("base64url")),
          fc.array(fc.string(), { minLength: 2, maxLength: 3 }),
        ),
        (value) => {
          if (typeof value === "string" && valid.has(value)) return;
          try {
            decodeIdentity(value);
          } catch (err) {
            expect(err).toBeInstanceOf(IdentityError);
            if (typeof value === "string" && value.length > 8)
              expect((err as Error).message).not.toContain(value);
            return;
          }
          // Only a well-formed document of kas's own shape reads; random JSON never does.
          throw new Error(`read ${JSON.stringify(value)}`);
        },
      ),
    );
  });

  test("absent, repeated, oversized, another shape or version: refused", () => {
    const enc = (doc: unknown) => Buffer.from(JSON.stringify(doc)).toString("base64url");
    const agent = encodeIdentity({ as: "agent" });
    for (const value of [
      undefined,
      "",
      [agent, agent],
      `${agent}, ${agent}`,
      "A".repeat(MAX_IDENTITY_LENGTH + 1),
      enc({ v: 2, as: "agent" }),
      enc({ v: 1, as: "root" }),
      enc({ v: 1, as: "agent", user: "admin" }),
      enc({ v: 1, as: "impersonate", groups: ["system:masters"], extra: [] }),
      enc({ v: 1, as: "impersonate", user: "", groups: [], extra: [] }),
    ]) {
      expect(() => decodeIdentity(value), JSON.stringify(value)).toThrow(IdentityError);
    }
  });

  test("as the API server reads them: repeated groups and extras, extra keys escaped", () => {
    expect(
      impersonationHeaders({
        username: "u",
        uid: "1",
        groups: ["a", "b"],
        extra: [{ key: "Agent.GitLab.com/ID", val: ["1", "2"] }],
      }),
    ).toEqual({
      "impersonate-user": "u",
      "impersonate-uid": "1",
      "impersonate-group": ["a", "b"],
      "impersonate-extra-agent.gitlab.com%2Fid": ["1", "2"],
    });
  });
});

// Each refusal by example, with its message: the properties above check that anything else is an
// IdentityError, these that each rule refuses for its own reason (and that none is redundant).
describe("each rule, at its edge", () => {
  const said = (value: string | string[] | undefined): string => {
    try {
      decodeIdentity(value);
    } catch (err) {
      expect(err).toBeInstanceOf(IdentityError);
      expect((err as Error).name).toBe("IdentityError");
      return (err as Error).message;
    }
    throw new Error("expected a refusal");
  };
  const agent = encodeIdentity({ as: "agent" });
  const enc = (doc: unknown) => Buffer.from(JSON.stringify(doc)).toString("base64url");

  test("absent, repeated, not base64url, not JSON, not kas's shape: each says so", () => {
    expect(said(undefined)).toBe("kas sent no identity with this request");
    expect(said([agent])).toBe("kas sent more than one identity");
    for (const value of ["", `!${agent}`, `${agent}=`, `${agent} `, `${agent}\n${agent}`])
      expect(said(value), JSON.stringify(value)).toBe("kas's identity header is malformed");
    expect(said(Buffer.from("{not json").toString("base64url"))).toBe(
      "kas's identity header is not valid JSON",
    );
    expect(said(enc({ v: 1, as: "root" }))).toBe("kas's identity header is not an identity this agent reads");
  });

  test("the length bound: an identity encoding to exactly the limit reads, the next length does not", () => {
    // Grow one group until the encoding reaches the limit, then just past it.
    const sized = (length: number) => {
      for (let n = Math.floor((length * 3) / 4) - 100; ; n++) {
        const identity = {
          as: "impersonate",
          who: { username: "u", groups: [`g${"x".repeat(n)}`], extra: [] },
        } as const;
        const value = encodeIdentity(identity);
        if (value.length >= length) return { identity, value };
      }
    };
    const atLimit = sized(MAX_IDENTITY_LENGTH);
    const over = sized(MAX_IDENTITY_LENGTH + 1);
    expect(atLimit.value.length).toBe(MAX_IDENTITY_LENGTH);
    expect(decodeIdentity(atLimit.value)).toEqual(atLimit.identity);
    // base64url never ends up 1 past a multiple of 4 characters: the next length is 2 more.
    expect(over.value.length).toBe(MAX_IDENTITY_LENGTH + 2);
    expect(said(over.value)).toBe("kas's identity header is malformed");
  });

  test("an identity without a uid reads back without one (not as uid: undefined)", () => {
    const who = decodeIdentity(
      encodeIdentity({ as: "impersonate", who: { username: "u", groups: [], extra: [] } }),
    );
    expect(who.as === "impersonate" && Object.keys(who.who).sort()).toEqual(["extra", "groups", "username"]);
  });

  test("no groups and no uid: no Impersonate-Group or Impersonate-Uid header at all", () => {
    expect(Object.keys(impersonationHeaders({ username: "u", groups: [], extra: [] }))).toEqual([
      "impersonate-user",
    ]);
  });

  test("extra keys: token characters kept (lowercased), any other byte as two uppercase hex digits", () => {
    expect(escapeExtraKey("A\tb/ü~")).toBe("a%09b%2F%C3%BC~");
  });

  test("the identity headers are those that start with impersonate-", () => {
    expect(isImpersonationHeader("impersonate-user")).toBe(true);
    expect(isImpersonationHeader("impersonate-extra-x")).toBe(true);
    expect(isImpersonationHeader("x-impersonate-")).toBe(false);
    expect(isImpersonationHeader("authorization")).toBe(false);
  });
});
