import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { RegistryUnavailableError } from "../../../lib/router/index.ts";
import type { AgentFilter, ConnectedAgent } from "../agents/index.ts";
import type { ListenConfig } from "../config/index.ts";
import type { AgentHttpProxy, AgentTarget } from "../http/agent-proxy.ts";
import { SERVICE_NAME } from "../http/agent-proxy.ts";
import { describeProxyError, failure, type ProxyFailure } from "../http/failure.ts";
import { type HttpListener, listenHttp } from "../http/listen.ts";
import { rawError } from "../http/raw-error.ts";
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
  log?: { warn(obj: object, msg: string): void };
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
 *   requests included. Errors: 404 not allow-listed (the agent's reason), 503 agent not
 *   connected within `agent.dial_timeout`, 504 no answer, 502 otherwise; body `{"error": "..."}`.
 */
export async function serveApi(options: ApiServerOptions): Promise<HttpListener> {
  const verify = createGitLabJwtVerifier(options.secret);
  const { proxy, agents, metrics } = options;

  const handle = async (req: IncomingMessage, res: ServerResponse, done: (route: string) => void) => {
    const url = new URL(req.url ?? "/", "http://kas");
    try {
      await verify(req.headers[GITLAB_REQUEST_HEADER]);
    } catch (err) {
      done(routeOf(url.pathname));
      if (!(err instanceof ApiAuthError)) throw err;
      return sendJson(res, 401, { error: err.message }, { "www-authenticate": `Bearer realm="gitlab-kas"` });
    }
    if (url.pathname === AGENTS_ROUTE || url.pathname === `${AGENTS_ROUTE}/`) {
      done(AGENTS_ROUTE);
      if (req.method !== "GET" && req.method !== "HEAD") {
        return sendJson(res, 405, { error: "only GET is allowed here" }, { allow: "GET, HEAD" });
      }
      const filter: AgentFilter = {};
      for (const [param, key] of [
        ["project_id", "projectId"],
        ["agent_id", "agentId"],
      ] as const) {
        const value = url.searchParams.get(param);
        if (value === null) continue;
        if (!/^[1-9]\d*$/.test(value))
          return sendJson(res, 400, { error: `${param} must be a positive integer` });
        filter[key] = value;
      }
      try {
        return sendJson(res, 200, { agents: await agents.connectedAgents(filter) });
      } catch (err) {
        if (!(err instanceof RegistryUnavailableError)) throw err;
        return sendJson(res, 503, { error: `cannot list the agents of other kas replicas: ${err.message}` });
      }
    }
    const target = serviceTarget(url);
    if (!target) {
      done("unknown");
      return sendJson(res, 404, { error: `no such endpoint: ${req.method} ${url.pathname}` });
    }
    done(SERVICE_ROUTE);
    if ("error" in target) return sendJson(res, target.error.status, { error: target.error.message });
    try {
      await proxy.forward(target, req, res, { path: target.path, drop: API_ONLY_HEADERS });
    } catch (err) {
      if (res.headersSent) return void res.destroy();
      const f = describeProxyError(err, target.agentId);
      if (f.status >= 500)
        options.log?.warn({ err, agentId: target.agentId, service: target.service }, "API proxy");
      sendJson(res, f.status, { error: f.message });
    }
  };

  return listenHttp({
    address: options.listen.address,
    tls: options.listen,
    handler: (req, res) => {
      let end: ((status: number) => void) | undefined;
      res.once("close", () => end?.(res.headersSent ? res.statusCode : 499));
      handle(req, res, (route) => {
        end = metrics?.start(route);
      }).catch((err: unknown) => {
        options.log?.warn({ err }, "API request failed");
        if (!res.headersSent) sendJson(res, 500, { error: "internal error" });
        else res.destroy();
      });
    },
    onUpgrade: (req, socket, head) => void upgrade(req, socket, head),
  });

  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? "/", "http://kas");
    const end = metrics?.start(routeOf(url.pathname));
    try {
      await verify(req.headers[GITLAB_REQUEST_HEADER]);
    } catch (err) {
      end?.(401);
      return rawError(socket, failure(401, (err as Error).message));
    }
    const target = serviceTarget(url);
    if (!target || "error" in target) {
      const f = target?.error ?? failure(404, `no such endpoint: ${req.method} ${url.pathname}`);
      end?.(f.status);
      return rawError(socket, f);
    }
    try {
      await proxy.upgrade(target, req, socket, head, { path: target.path, drop: API_ONLY_HEADERS });
      end?.(101);
    } catch (err) {
      const f = describeProxyError(err, target.agentId);
      end?.(f.status);
      rawError(socket, f);
    }
  }
}

/** GitLab's credentials are for kas, not for the agent's services. */
const API_ONLY_HEADERS: ReadonlySet<string> = new Set([GITLAB_REQUEST_HEADER, "authorization", "cookie"]);

function routeOf(pathname: string): string {
  if (pathname === AGENTS_ROUTE || pathname === `${AGENTS_ROUTE}/`) return AGENTS_ROUTE;
  return SERVICE_PATH.test(pathname) ? SERVICE_ROUTE : "unknown";
}

type ServiceTarget = (AgentTarget & { path: string }) | { error: ProxyFailure };

function serviceTarget(url: URL): ServiceTarget | undefined {
  const m = SERVICE_PATH.exec(url.pathname);
  if (!m) return undefined;
  const agentId = decodeURIComponent(m[1]!);
  const service = decodeURIComponent(m[2]!);
  if (!/^[1-9]\d*$/.test(agentId)) return { error: failure(400, "agent id must be a positive integer") };
  if (!SERVICE_NAME.test(service)) return { error: failure(404, `service "${service}" is not allow-listed`) };
  return { agentId, service, path: `${m[3] ?? "/"}${url.search}` };
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "cache-control": "no-store",
    "content-length": Buffer.byteLength(text),
  });
  res.end(res.req.method === "HEAD" ? undefined : text);
}
