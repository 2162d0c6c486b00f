// As whom the cluster sees a request kas proxied: kas decides (from GitLab's answers and the
// agent's configuration) and says so in one header of its own, `Kas-Identity`, that agentk turns
// into Impersonate-* headers after dropping every identity header that came with the request.
// The client can neither set it (kas drops any it sends) nor remove it (agentk reads it before any
// hop-by-hop rule applies), and agentk serves no request without it: a lost or mangled identity
// is refused, never run as agentk's own service account by accident.
import { z } from "zod";

/** An identity kas has the cluster see (GitLab's `gitlab:ci_job:<id>`, a user, or a configured one). */
export interface Impersonation {
  username: string;
  groups: readonly string[];
  uid?: string;
  extra: readonly { key: string; val: readonly string[] }[];
}

/** What kas decided: the agent's own identity (`access_as: {agent: {}}`), or an impersonated one. */
export type ClusterIdentity = { as: "agent" } | { as: "impersonate"; who: Impersonation };

/** Largest encoded identity agentk reads: GitLab's roles of one user fit many times over. */
export const MAX_IDENTITY_LENGTH = 32 * 1024;

// Printable without escaping in a header value; versioned so a later kas can say more.
const WIRE = z.discriminatedUnion("as", [
  z.object({ v: z.literal(1), as: z.literal("agent") }).strict(),
  z
    .object({
      v: z.literal(1),
      as: z.literal("impersonate"),
      user: z.string().min(1),
      uid: z.string().min(1).optional(),
      groups: z.array(z.string().min(1)),
      extra: z.array(z.object({ key: z.string().min(1), val: z.array(z.string()) }).strict()),
    })
    .strict(),
]);

/** The header's value for `identity` (base64url of a small JSON document). */
export function encodeIdentity(identity: ClusterIdentity): string {
  const wire: z.infer<typeof WIRE> =
    identity.as === "agent"
      ? { v: 1, as: "agent" }
      : {
          v: 1,
          as: "impersonate",
          user: identity.who.username,
          ...(identity.who.uid !== undefined && { uid: identity.who.uid }),
          groups: [...identity.who.groups],
          extra: identity.who.extra.map(({ key, val }) => ({ key, val: [...val] })),
        };
  return Buffer.from(JSON.stringify(wire)).toString("base64url");
}

/** A `Kas-Identity` value agentk cannot read: the request is refused. */
export class IdentityError extends Error {
  override name = "IdentityError";
}

/**
 * Reads what kas sent; anything but exactly one well-formed value is an IdentityError (whose
 * message never echoes the value).
 */
export function decodeIdentity(value: string | readonly string[] | undefined): ClusterIdentity {
  if (value === undefined) throw new IdentityError("kas sent no identity with this request");
  if (typeof value !== "string") throw new IdentityError("kas sent more than one identity");
  if (value.length > MAX_IDENTITY_LENGTH || !/^[A-Za-z0-9_-]+$/.test(value))
    throw new IdentityError("kas's identity header is malformed");
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(value, "base64url").toString("utf8"));
  } catch {
    throw new IdentityError("kas's identity header is not valid JSON");
  }
  const parsed = WIRE.safeParse(doc);
  if (!parsed.success) throw new IdentityError("kas's identity header is not an identity this agent reads");
  const w = parsed.data;
  if (w.as === "agent") return { as: "agent" };
  return {
    as: "impersonate",
    who: { username: w.user, ...(w.uid !== undefined && { uid: w.uid }), groups: w.groups, extra: w.extra },
  };
}

/**
 * The Impersonate-* request headers for `who` (lowercase names; a list is sent as repeated
 * headers). Extra keys are percent-encoded into the header name as the API server expects.
 */
export function impersonationHeaders(who: Impersonation): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = { "impersonate-user": who.username };
  if (who.groups.length > 0) headers["impersonate-group"] = [...who.groups];
  if (who.uid !== undefined) headers["impersonate-uid"] = who.uid;
  for (const { key, val } of who.extra) headers[`impersonate-extra-${escapeExtraKey(key)}`] = [...val];
  return headers;
}

/** RFC 7230 token characters stay (lowercased, as header names are case-insensitive), others become %XX. */
export function escapeExtraKey(key: string): string {
  let out = "";
  for (const byte of Buffer.from(key.toLowerCase(), "utf8")) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9!#$&'*+\-.^_`|~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Whether `name` (lowercase) is one of the API server's identity headers. */
export function isImpersonationHeader(name: string): boolean {
  return name.startsWith("impersonate-");
}
