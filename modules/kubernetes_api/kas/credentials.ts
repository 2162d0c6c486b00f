// Who a request to the Kubernetes API proxy says it is, as GitLab's kas reads it: a CI job
// (`Authorization: Bearer ci:<agent id>:<job token>`), a user's personal access token
// (`Bearer pat:<agent id>:<token>`), the web UI's session (`_gitlab_kas` cookie, `Gitlab-Agent-Id`,
// `X-Csrf-Token`), or, for development, a static agent token (`Bearer <token>`).
import type { IncomingHttpHeaders } from "node:http";
import { cookieValue } from "../../../tool/http/serve/index.ts";
import { ProxyAccessError } from "./access.ts";

export type ProxyCredentials =
  | { kind: "ci_job"; agentId: string; jobToken: string }
  | { kind: "personal_access_token"; agentId: string; token: string }
  | { kind: "session_cookie"; agentId: string; cookie: string; csrfToken: string }
  | { kind: "agent_token"; token: string };

export const SESSION_COOKIE = "_gitlab_kas";
export const AGENT_ID_HEADER = "gitlab-agent-id";
export const CSRF_TOKEN_HEADER = "x-csrf-token";

/** The request headers that carry GitLab credentials: never passed on to the cluster. */
export const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([
  "authorization",
  "cookie",
  AGENT_ID_HEADER,
  CSRF_TOKEN_HEADER,
]);

const TYPED = /^(ci|pat):/;
// GitLab's ids are int64: 1 .. 2^63-1.
const MAX_ID = 2n ** 63n - 1n;

function agentIdOf(text: string, where: string): string {
  if (!/^[1-9]\d{0,18}$/.test(text) || BigInt(text) > MAX_ID) {
    throw refused(`${where}: the agent id must be a positive integer`);
  }
  return text;
}

function refused(message: string): ProxyAccessError {
  return new ProxyAccessError(401, message);
}

/**
 * Reads the credentials; a malformed or missing one is a 401 whose message never echoes a token.
 * `Authorization` wins over the session cookie, as in GitLab's kas.
 */
export function parseProxyCredentials(headers: IncomingHttpHeaders): ProxyCredentials {
  const auth = headers.authorization;
  if (auth !== undefined) return parseAuthorization(auth);
  const cookie = cookieValue(headers.cookie, SESSION_COOKIE);
  if (cookie !== undefined) return parseSession(cookie, headers);
  throw refused(
    'expected "Authorization: Bearer ci:<agent id>:<job token>", "Bearer pat:<agent id>:<token>" or the _gitlab_kas session cookie',
  );
}

export function parseAuthorization(value: string): ProxyCredentials {
  const m = /^Bearer (.+)$/i.exec(value);
  if (m === null || /\s/.test(m[1]!)) throw refused('expected "Authorization: Bearer <token>"');
  const token = m[1]!;
  const typed = TYPED.exec(token);
  if (typed === null) return { kind: "agent_token", token };
  const rest = token.slice(typed[0].length);
  const colon = rest.indexOf(":");
  const type = typed[1] === "ci" ? "ci:" : "pat:";
  if (colon < 0) throw refused(`Authorization: expected ${type}<agent id>:<token>`);
  const agentId = agentIdOf(rest.slice(0, colon), "Authorization");
  const secret = rest.slice(colon + 1);
  if (secret === "") throw refused("Authorization: empty token");
  return typed[1] === "ci"
    ? { kind: "ci_job", agentId, jobToken: secret }
    : { kind: "personal_access_token", agentId, token: secret };
}

function parseSession(cookie: string, headers: IncomingHttpHeaders): ProxyCredentials {
  if (cookie === "") throw refused(`the ${SESSION_COOKIE} cookie is empty`);
  let decoded: string;
  try {
    // Rails (rack) escapes cookie values.
    decoded = decodeURIComponent(cookie.replace(/\+/g, " "));
  } catch {
    throw refused(`the ${SESSION_COOKIE} cookie is not valid`);
  }
  const agentId = headers[AGENT_ID_HEADER];
  if (typeof agentId !== "string") throw refused("Gitlab-Agent-Id: expected exactly one value");
  const csrf = headers[CSRF_TOKEN_HEADER];
  if (typeof csrf !== "string" || csrf === "") throw refused("X-Csrf-Token: expected exactly one value");
  return {
    kind: "session_cookie",
    agentId: agentIdOf(agentId.trim(), "Gitlab-Agent-Id"),
    cookie: decoded,
    csrfToken: csrf,
  };
}
