import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { kubeStatus } from "../../common/kubernetes-status.ts";
import type { ListenConfig } from "../config/index.ts";
import {
  type AgentHttpProxy,
  describeProxyError,
  type ForwardOptions,
  failure,
  type HttpListener,
  listenHttp,
  type ProxyFailure,
  rawError,
} from "../http/index.ts";
import type { RequestMetrics } from "../observability/index.ts";
import { type AuthorizeProxyRequest, type ProxyAccess, ProxyAccessError } from "./access.ts";

/** The service name agentk serves its Kubernetes API proxy under. */
export const KUBERNETES_SERVICE = "kubernetes";

export interface KubernetesProxyOptions {
  listen: ListenConfig;
  /** Path prefix stripped before forwarding (agent.kubernetes_api.url_path_prefix). */
  urlPathPrefix?: string;
  authorize: AuthorizeProxyRequest;
  proxy: AgentHttpProxy;
  metrics?: RequestMetrics;
  log?: { warn(obj: object, msg: string): void };
}

const ROUTE = "kubernetes_api";
const UPGRADE_ROUTE = "kubernetes_api_upgrade";

/**
 * The Kubernetes API proxy (8154): an authorized request goes, over the agent's tunnel, to
 * agentk's `kubernetes` service, which sends it to the API server with its own credentials.
 * Both bodies stream (watch, `logs -f`); Upgrade requests (exec, attach, port-forward) are
 * spliced. The caller's `Authorization` and any `Impersonate-*` it sent never reach the agent;
 * kas sets impersonation itself. Failures are Kubernetes `Status` objects: 401 / 403 / 404 from
 * authorization or the agent's refusal, 503 agent not connected (within `agent.dial_timeout`),
 * 504 no answer in time, 502 otherwise.
 */
export async function serveKubernetesProxy(options: KubernetesProxyOptions): Promise<HttpListener> {
  const { proxy, metrics, authorize } = options;
  const prefix = (options.urlPathPrefix ?? "/").replace(/\/+$/, "");

  const forwardOptions = (req: IncomingMessage, access: ProxyAccess): ForwardOptions | ProxyFailure => {
    const raw = req.url ?? "/";
    if (prefix !== "" && raw !== prefix && !raw.startsWith(`${prefix}/`) && !raw.startsWith(`${prefix}?`)) {
      return failure(404, `the Kubernetes API is served under ${prefix}/`);
    }
    const rest = raw.slice(prefix.length);
    const drop = new Set(["authorization", "cookie"]);
    for (const name of Object.keys(req.headers)) if (name.startsWith("impersonate-")) drop.add(name);
    return { path: rest.startsWith("/") ? rest : `/${rest}`, drop, add: { ...access.impersonate } };
  };

  const authorizeOrFail = async (
    req: IncomingMessage,
    signal: AbortSignal,
  ): Promise<ProxyAccess | ProxyFailure> => {
    try {
      return await authorize(req, signal);
    } catch (err) {
      if (err instanceof ProxyAccessError) return failure(err.status, err.message);
      throw err;
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.once("close", onClose);
    const access = await authorizeOrFail(req, gone.signal).finally(() => res.off("close", onClose));
    if ("status" in access) return sendStatus(res, access);
    const o = forwardOptions(req, access);
    if ("status" in o) return sendStatus(res, o);
    try {
      await proxy.forward({ agentId: access.agentId, service: KUBERNETES_SERVICE }, req, res, o);
    } catch (err) {
      if (res.headersSent || res.destroyed) return void res.destroy();
      const f = describeProxyError(err, access.agentId);
      if (f.status >= 500) options.log?.warn({ err, agentId: access.agentId }, "Kubernetes API proxy");
      sendStatus(res, f);
    }
  };

  const upgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const end = metrics?.start(UPGRADE_ROUTE);
    const gone = new AbortController();
    socket.once("close", () => gone.abort());
    const refuse = (f: ProxyFailure) => {
      end?.(f.status);
      rawError(socket, f, `${JSON.stringify(kubeStatus(f.status, f.message, f.reason))}\n`);
    };
    const access = await authorizeOrFail(req, gone.signal);
    if ("status" in access) return refuse(access);
    const o = forwardOptions(req, access);
    if ("status" in o) return refuse(o);
    try {
      await proxy.upgrade({ agentId: access.agentId, service: KUBERNETES_SERVICE }, req, socket, head, o);
      end?.(101);
    } catch (err) {
      refuse(describeProxyError(err, access.agentId));
    }
  };

  return listenHttp({
    address: options.listen.address,
    tls: options.listen,
    handler: (req, res) => {
      const end = metrics?.start(ROUTE);
      res.once("close", () => end?.(res.headersSent ? res.statusCode : 499));
      handle(req, res).catch((err: unknown) => {
        options.log?.warn({ err }, "Kubernetes API proxy request failed");
        if (!res.headersSent) sendStatus(res, failure(500, "internal error"));
        else res.destroy();
      });
    },
    onUpgrade: (req, socket, head) => void upgrade(req, socket, head).catch(() => socket.destroy()),
  });
}

function sendStatus(res: ServerResponse, f: ProxyFailure): void {
  const body = `${JSON.stringify(kubeStatus(f.status, f.message, f.reason))}\n`;
  const headers: Record<string, string | number> = {
    "content-type": "application/json",
    "cache-control": "no-store",
    "content-length": Buffer.byteLength(body),
  };
  if (f.status === 401) headers["www-authenticate"] = 'Bearer realm="kas"';
  res.writeHead(f.status, headers);
  res.end(res.req.method === "HEAD" ? undefined : body);
}
