// Who a request to the Kubernetes test server acts as: the Impersonate-* headers (as the real API
// server reads them: one value per header line, extra keys percent-decoded and lowercased), or
// the token's own user. Answers `kubectl auth whoami` (SelfSubjectReview) with it.
import type { IncomingMessage } from "node:http";

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

/** The token's own user (agentk's credentials), when nothing is impersonated. */
export const TOKEN_USER: UserInfo = {
  username: "system:serviceaccount:gitlab-agent:agentk",
  groups: ["system:serviceaccounts", "system:authenticated"],
  extra: {},
};

/** The impersonated identity of `req`; undefined when it impersonates nobody. */
export function impersonationOf(req: IncomingMessage): UserInfo | undefined {
  const h = req.headersDistinct;
  const username = h["impersonate-user"]?.[0];
  if (username === undefined) return undefined;
  const extra: Record<string, string[]> = {};
  for (const [name, values] of Object.entries(h)) {
    if (!name.startsWith("impersonate-extra-") || values === undefined) continue;
    extra[decodeURIComponent(name.slice("impersonate-extra-".length)).toLowerCase()] = values;
  }
  const uid = h["impersonate-uid"]?.[0];
  return { username, ...(uid !== undefined && { uid }), groups: h["impersonate-group"] ?? [], extra };
}

/**
 * Why the API server refuses `req`'s impersonation, if it does: groups, a uid or extras without a
 * user (its impersonation filter answers 500 "requested ... without impersonating a user").
 */
export function impersonationRefusal(req: IncomingMessage): string | undefined {
  if (req.headers["impersonate-user"] !== undefined) return undefined;
  const partial = Object.keys(req.headers).filter((n) => n.startsWith("impersonate-"));
  return partial.length === 0 ? undefined : `requested ${partial.join(", ")} without impersonating a user`;
}

/** The body of a SelfSubjectReview created by `who` (POST /apis/authentication.k8s.io/v1/selfsubjectreviews). */
export function selfSubjectReview(who: UserInfo) {
  return {
    kind: "SelfSubjectReview",
    apiVersion: "authentication.k8s.io/v1",
    metadata: { creationTimestamp: null },
    status: { userInfo: who },
  };
}
