// kas's identity header, as agentk reads it: any identity kas encodes reads back the same; anything
// else (absent, repeated, truncated, forged shapes, any bytes) is refused, never read as "the agent".
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  decodeIdentity,
  encodeIdentity,
  IdentityError,
  impersonationHeaders,
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
