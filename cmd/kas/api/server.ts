import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { RegistryUnavailableError } from "../../../lib/router/index.ts";
import {
  decodePathSegment,
  type GuardLog,
  HttpError,
  jsonError,
  rawAnswer,
  requestTarget,
  sendBody,
} from "../../common/http/index.ts";
import type { AgentFilter, ConnectedAgent } from "../agents/index.ts";
import type { ListenConfig } from "../config/index.ts";
import type { AgentHttpProxy, AgentTarget } from "../http/agent-proxy.ts";
import { SERVICE_NAME } from "../http/agent-proxy.ts";
import { describeProxyError } from "../http/failure.ts";
import { type HttpListener, listenHttp } from "../http/listen.ts";
import type { RequestMetrics } from "../observability/index.ts";
import { ApiAuthError, createGitLabJwtVerifier, GITLAB_REQUEST_HEADER } from "./gitlab-jwt.ts";

export interface ApiServerOptions {
  listen: ListenConfig;
  /** Shared with GitLab (api.listen.authentication_secret_file). */
  secret: Uint8Array;
  /** Agents with tunnels at any live replica. */
  agents: { connectedAgents(filter?: AgentFilter): Promise<ConnectedAgent[]> };
  proxy: AgentHttpProxy;
  metrics?: RequestMetrics;
  log?: GuardLog & { warn(obj: object, msg: string): void };
}

export const AGENTS_ROUTE = "/api/v1/agents";
export const SERVICE_ROUTE = "/api/v1/agents/{agent_id}/services/{name}/*";
const SERVICE_PATH = /^\/api\/v1\/agents\/([^/]+)\/services\/([^/]+)(\/.*)?$/;

/**
 * The API GitLab calls (8153). Every request carries GitLab's JWT in `Gitlab-Kas-Api-Request`;
 * without a valid one: 401. JSON in, JSON out:
 * - `GET /api/v1/agents[?project_id=N][&agent_id=N]` -> `{"agents": [{agentId, projectId, agentName, tunnels, connectedSince}]}`:
 *   agents with a tunnel at any live kas replica (503 when Redis cannot say).
 * - `ANY /api/v1/agents/{agentId}/services/{name}/{path}` -> proxied, streaming, to the agent's
 *   allow-listed in-cluster service `name` at `/{path}` (how GitLab queries Prometheus); Upgrade
 *   requests included. Errors: 400 bad agent id or malformed percent-encoding, 404 not
 *   allow-listed (the agent's reason), 503 agent not connected within `agent.dial_timeout`, 504 no
 *   answer, 502 otherwise; body `{"error": "..."}`. Whatever else fails is a 500 (see `guardServer`).
 */
export async function serveApi(options: ApiServerOptions): Promise<HttpListener> {
  const verify = createGitLabJwtVerifier(options.secret);
  const { proxy, agents } = options;

  /** GitLab's JWT, or a 401. */
  const authenticate = async (req: IncomingMessage) => {
    try {
      await verify(req.headers[GITLAB_REQUEST_HEADER]);
    } catch (err) {
      if (!(err instanceof ApiAuthError)) throw err;
      throw new HttpError(401, err.message, { "www-authenticate": `Bearer realm="gitlab-kas"` });
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    await authenticate(req);
    const { pathname, search, query } = requestTarget(req);
    if (routeOfPath(pathname) === AGENTS_ROUTE) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        throw new HttpError(405, "only GET is allowed here", { allow: "GET, HEAD" });
      }
      const filter: AgentFilter = {};
      for (const [param, key] of [
        ["project_id", "projectId"],
        ["agent_id", "agentId"],
      ] as const) {
        const value = query.get(param);
        if (value === null) continue;
        if (!/^[1-9]\d*$/.test(value)) throw new HttpError(400, `${param} must be a positive integer`);
        filter[key] = value;
      }
      let listed: ConnectedAgent[];
      try {
        listed = await agents.connectedAgents(filter);
      } catch (err) {
        if (!(err instanceof RegistryUnavailableError)) throw err;
        throw new HttpError(503, `cannot list the agents of other kas replicas: ${err.message}`);
      }
      return sendJson(res, 200, { agents: listed });
    }
    const target = serviceTarget(req, pathname, search);
    try {
      await proxy.forward(target, req, res, { path: target.path, drop: API_ONLY_HEADERS });
    } catch (err) {
      // Cut after its headers went out: the guard logs it and counts it as aborted.
      if (res.headersSent) throw err;
      const f = describeProxyError(err, target.agentId);
      if (f.status >= 500)
        options.log?.warn({ err, agentId: target.agentId, service: target.service }, "API proxy");
      sendJson(res, f.status, { error: f.message });
    }
  };

  const upgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<number> => {
    await authenticate(req);
    const { pathname, search } = requestTarget(req);
    const target = serviceTarget(req, pathname, search);
    try {
      await proxy.upgrade(target, req, socket, head, { path: target.path, drop: API_ONLY_HEADERS });
      return 101;
    } catch (err) {
      const f = describeProxyError(err, target.agentId);
      rawAnswer(socket, f.status, jsonError(f));
      return f.status;
    }
  };

  return listenHttp({
    address: options.listen.address,
    tls: options.listen,
    front: "api",
    ...(options.log && { log: options.log }),
    ...(options.metrics && { metrics: options.metrics }),
    routeOf: (req) => routeOfPath(requestTarget(req).pathname),
    handler: handle,
    onUpgrade: upgrade,
  });
}

/** GitLab's credentials are for kas, not for the agent's services. */
const API_ONLY_HEADERS: ReadonlySet<string> = new Set([GITLAB_REQUEST_HEADER, "authorization", "cookie"]);

function routeOfPath(pathname: string): string {
  if (pathname === AGENTS_ROUTE || pathname === `${AGENTS_ROUTE}/`) return AGENTS_ROUTE;
  return SERVICE_PATH.test(pathname) ? SERVICE_ROUTE : "unknown";
}

/** Which agent's service a proxied request is for; an unknown endpoint, bad id or name is an HttpError. */
function serviceTarget(
  req: IncomingMessage,
  pathname: string,
  search: string,
): AgentTarget & { path: string } {
  const m = SERVICE_PATH.exec(pathname);
  if (!m) throw new HttpError(404, `no such endpoint: ${req.method} ${pathname}`);
  const agentId = decodePathSegment(m[1]!, "agent id");
  const service = decodePathSegment(m[2]!, "service name");
  if (!/^[1-9]\d*$/.test(agentId)) throw new HttpError(400, "agent id must be a positive integer");
  if (!SERVICE_NAME.test(service)) throw new HttpError(404, `service "${service}" is not allow-listed`);
  return { agentId, service, path: `${m[3] ?? "/"}${search}` };
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  sendBody(res, status, { type: "application/json", body: `${JSON.stringify(body)}\n` }, headers);
}
