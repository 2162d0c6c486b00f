import { createHmac, randomBytes } from "node:crypto";

/** Turns an agent token into the name its limits are counted under. */
export type TokenKeyer = (token: string) => string;

/**
 * HMAC-SHA256 of the whole token, keyed: the name under which a token's limits are counted, here
 * and in Redis keys. Redis is shared and may be read by more than kas, so the token never appears
 * there, and the key makes the names useless for testing guesses offline, even of the weak tokens
 * a static tokens file may hold. GitLab's kas hashes the token's first half (`AgentToken2key`):
 * that suits GitLab's random tokens, but two static tokens with a common first half (say
 * `dev-token-for-agent-42` and `…-43`) would share one agent's limits, so the whole token is used.
 *
 * `secret`: the same bytes on every replica (with Redis, the private API's secret, which they all
 * hold) so that they all count a token under one name; without it, random bytes of this process.
 */
export function tokenKeyer(secret?: Uint8Array): TokenKeyer {
  // A key of its own, derived, so these names say nothing about the secret's other use (JWTs).
  const key = createHmac("sha256", secret ?? randomBytes(32))
    .update("gitlab-agent-ts agent token limits")
    .digest();
  return (token) => createHmac("sha256", key).update(token, "utf8").digest("hex");
}
