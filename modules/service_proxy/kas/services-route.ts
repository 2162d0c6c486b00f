import type { IncomingMessage } from "node:http";
import {
  type AgentHttpProxy,
  type AgentTarget,
  describeProxyError,
  SERVICE_NAME,
} from "../../../tool/http/proxy/index.ts";
import {
  ClientGoneError,
  decodePathSegment,
  HttpError,
  jsonError,
  type RequestTarget,
  rawAnswer,
  requestTarget,
  sendJson,
} from "../../../tool/http/serve/index.ts";
import { type ApiRoute, KUBERNETES_SERVICE } from "../../runtime/index.ts";

export const SERVICE_ROUTE = "/api/v1/agents/{agent_id}/services/{name}/*";
const SERVICE_PATH = /^\/api\/v1\/agents\/([^/]+)\/services\/([^/]+)(\/.*)?$/;

/**
 * `ANY /api/v1/agents/{agentId}/services/{name}/{path}` on GitLab's API -> proxied, streaming, to
 * the agent's allow-listed in-cluster service `name` at `/{path}` (how GitLab queries Prometheus);
 * Upgrade requests included. Errors: 400 bad agent id or malformed percent-encoding, 404 not
 * allow-listed (the agent's reason, or `kubernetes`: the cluster's API is not a service), 503 agent not connected within `agent.dial_timeout`, 504 no
 * answer, 502 otherwise; body `{"error": "..."}`.
 */
export function servicesRoute(
  proxy: AgentHttpProxy,
  /** Headers for kas only (GitLab's credentials): they never reach the agent's services. */
  credentials: ReadonlySet<string>,
  log?: { warn(obj: object, msg: string): void },
): ApiRoute {
  const drop = (name: string) => credentials.has(name);
  return {
    route: SERVICE_ROUTE,
    matches: (pathname) => SERVICE_PATH.test(pathname),
    async handle(req, res) {
      const target = serviceTarget(req, requestTarget(req));
      try {
        await proxy.forward(target, req, res, { path: target.path, drop });
      } catch (err) {
        // Cut after its headers went out: the guard logs it and counts it as aborted.
        if (res.headersSent) throw err;
        // The client left before the agent answered (which aborted the request): no failure to report.
        if (res.destroyed) throw new ClientGoneError();
        const f = describeProxyError(err, target.agentId);
        if (f.status >= 500)
          log?.warn({ err, agentId: target.agentId, service: target.service }, "API proxy");
        sendJson(res, f.status, { error: f.message });
      }
    },
    async upgrade(req, socket, head) {
      const target = serviceTarget(req, requestTarget(req));
      try {
        await proxy.upgrade(target, req, socket, head, { path: target.path, drop });
        return 101;
      } catch (err) {
        const f = describeProxyError(err, target.agentId);
        rawAnswer(socket, f.status, jsonError(f));
        return f.status;
      }
    },
  };
}

/** Which agent's service a proxied request is for; a bad id or name is an HttpError. */
function serviceTarget(
  req: IncomingMessage,
  { pathname, search }: RequestTarget,
): AgentTarget & { path: string } {
  const m = SERVICE_PATH.exec(pathname);
  if (!m) throw new HttpError(404, `no such endpoint: ${req.method} ${pathname}`);
  const agentId = decodePathSegment(m[1]!, "agent id");
  const service = decodePathSegment(m[2]!, "service name");
  if (!/^[1-9]\d*$/.test(agentId)) throw new HttpError(400, "agent id must be a positive integer");
  if (!SERVICE_NAME.test(service)) throw new HttpError(404, `service "${service}" is not allow-listed`);
  // The Kubernetes API is reached through the Kubernetes API proxy only, under its credential and
  // impersonation rules; agentk refuses it without kas's identity in any case.
  if (service === KUBERNETES_SERVICE)
    throw new HttpError(404, `service "${service}" is not allow-listed: use the Kubernetes API proxy`);
  return { agentId, service, path: `${m[3] ?? "/"}${search}` };
}
