// An agent token travels with the agent's identity through kas: whatever prints, logs or serializes
// it must show "[REDACTED]"; only reveal() gives the token, and the fingerprint cannot give it back.
import { createHash } from "node:crypto";
import { inspect } from "node:util";
import { expect, test } from "vitest";
import { AgentToken, tokenDigest, tokenFingerprint } from "../../tool/agent-token.ts";

const SECRET = "glagent-Zk9sdj-Ux2X_sQ8qPJm"; // any string: nothing here parses it

test("the token prints, serializes and inspects as [REDACTED]; reveal() alone gives it", () => {
  const token = new AgentToken(SECRET);
  expect(token.reveal()).toBe(SECRET);
  expect(String(token)).toBe("[REDACTED]");
  expect(`${token}`).toBe("[REDACTED]");
  expect(JSON.stringify({ token })).toBe('{"token":"[REDACTED]"}');
  expect(inspect(token)).toBe("AgentToken [REDACTED]");
  expect(inspect({ nested: { token } }, { depth: 5 })).not.toContain(SECRET);
});

test("the digest is SHA-256 of the UTF-8 token; the fingerprint its first 12 hex digits", () => {
  const token = "tökén";
  const expected = createHash("sha256").update(Buffer.from(token, "utf8")).digest();
  expect(tokenDigest(token)).toEqual(expected);
  expect(tokenFingerprint(token)).toBe(expected.toString("hex").slice(0, 12));
  expect(new AgentToken(token).fingerprint).toBe(tokenFingerprint(token));
  expect(tokenFingerprint("a")).not.toBe(tokenFingerprint("b"));
});
