// Gitaly's v2 token authentication (gitlab-org/gitaly auth/token.go): the shared secret never
// travels; each call carries an HMAC-SHA256 of the current unix time keyed by it, and Gitaly
// accepts timestamps within 30 s of its clock.
import { createHmac } from "node:crypto";

/** The `authorization` metadata value for `secret` at `nowMs`: "Bearer v2.<hex hmac>.<unix seconds>". */
export function gitalyAuthorization(secret: string, nowMs: number): string {
  const timestamp = Math.floor(nowMs / 1000).toString();
  const signature = createHmac("sha256", secret).update(timestamp).digest("hex");
  return `Bearer v2.${signature}.${timestamp}`;
}
