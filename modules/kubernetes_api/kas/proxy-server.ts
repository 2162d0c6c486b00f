import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { ListenConfig } from "../../../tool/config/values.ts";
import {
  type AgentHttpProxy,
  DOT_SEGMENTS,
  describeProxyError,
  type ForwardOptions,
  failure,
  type ProxyFailure,
} from "../../../tool/http/proxy/index.ts";
import {
  ClientGoneError,
  type ConnectionLimits,
  type ErrorRenderer,
  type GuardLog,
  type HttpListener,
  isPlainPath,
  listenHttp,
  rawAnswer,
  sendBody,
} from "../../../tool/http/serve/index.ts";
import { kubeStatus } from "../../../tool/kubernetes-status.ts";
import type { RequestMetrics } from "../../../tool/observability/index.ts";
import { KUBERNETES_SERVICE } from "../../runtime/index.ts";
import { isImpersonationHeader } from "../identity.ts";
import { type AuthorizeProxyRequest, type ProxyAccess, ProxyAccessError } from "./access.ts";
import { type CorsPolicy, corsHeaders, preflightHeaders } from "./cors.ts";
import { CREDENTIAL_HEADERS } from "./credentials.ts";

export interface KubernetesProxyOptions {
  listen: ListenConfig;
  /** Path prefix stripped before forwarding (agent.kubernetes_api.url_path_prefix). */
  urlPathPrefix?: string;
  authorize: AuthorizeProxyRequest;
  proxy: AgentHttpProxy;
  metrics?: RequestMetrics;
  /** Which browser origins may call (GitLab's external URL); none without it. */
  cors?: CorsPolicy;
  log?: GuardLog & { warn(obj: object, msg: string): void };
  /** Default `DEFAULT_CONNECTION_LIMITS`. */
  limits?: ConnectionLimits;
}

const ROUTE = "kubernetes_api";
const UPGRADE_ROUTE = "kubernetes_api_upgrade";

/**
 * The Kubernetes API proxy (8154): an authorized request goes, over the agent's tunnel, to
 * agentk's `kubernetes` service, which sends it to the API server with its own credentials.
 * Both bodies stream (watch, `logs -f`); Upgrade requests (exec, attach, port-forward) are
 * spliced. The caller's credentials (`Authorization`, cookies, `Gitlab-Agent-Id`, `X-Csrf-Token`)
 * never reach the agent, nor do its own `Impersonate-*` headers: as whom the cluster sees the
 * request travels as kas's identity header only (see ../identity.ts). When kas impersonates, a
 * request with its own `Impersonate-*` headers is refused (403); otherwise they are dropped. Refusals of credentials (401) carry
 * `Gitlab-Unauthorized: true`, telling them apart from the cluster's own 401. Failures are Kubernetes `Status` objects: 401 / 403 / 404 from
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
    const path = rest.startsWith("/") ? rest : `/${rest}`;
    if (!isPlainPath(path)) return failure(400, DOT_SEGMENTS);
    if (access.impersonate !== undefined) {
      const own = Object.keys(req.headers).find(isImpersonationHeader);
      if (own !== undefined)
        return failure(403, `kas impersonates on this agent's behalf: the request may not set ${own}`);
    }
    return {
      path,
      drop: notForTheCluster,
      identity: access.identity,
    };
  };

  const authorizeOrFail = async (
    req: IncomingMessage,
    leaving: Leaving,
  ): Promise<ProxyAccess | ProxyFailure> => {
    try {
      return await authorize(req, leaving.signal);
    } catch (err) {
      if (err instanceof ProxyAccessError) return failure(err.status, err.message);
      // The wait for GitLab was cut because the client left: whatever it failed with says so.
      if (leaving.left) throw new ClientGoneError();
      throw err;
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const cors = corsHeaders(options.cors, req.headers.origin);
    if (cors === undefined) return sendStatus(res, FOREIGN_ORIGIN);
    for (const [name, value] of Object.entries(cors)) res.setHeader(name, value);
    if (req.method === "OPTIONS" && req.headers.origin !== undefined) {
      res.writeHead(200, preflightHeaders(req.headers)).end();
      return;
    }
    const leaving = new Leaving();
    res.once("close", leaving.leave);
    let access: ProxyAccess | ProxyFailure;
    try {
      access = await authorizeOrFail(req, leaving);
    } finally {
      res.off("close", leaving.leave);
    }
    if ("status" in access) return sendStatus(res, access);
    const o = forwardOptions(req, access);
    if ("status" in o) return sendStatus(res, o);
    try {
      await proxy.forward({ agentId: access.agentId, service: KUBERNETES_SERVICE }, req, res, o);
    } catch (err) {
      // Cut after its headers went out: the guard logs it and counts it as aborted.
      if (res.headersSent) throw err;
      if (res.destroyed) throw new ClientGoneError(); // it left before the agent answered
      const f = describeProxyError(err, access.agentId);
      if (f.status >= 500) options.log?.warn({ err, agentId: access.agentId }, "Kubernetes API proxy");
      sendStatus(res, f);
    }
  };

  const upgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<number> => {
    const leaving = new Leaving();
    socket.once("close", leaving.leave);
    const refuse = (f: ProxyFailure) => {
      rawAnswer(socket, f.status, renderStatus(f), f.status === 401 ? UNAUTHORIZED_HEADERS : {});
      return f.status;
    };
    if (corsHeaders(options.cors, req.headers.origin) === undefined) return refuse(FOREIGN_ORIGIN);
    const access = await authorizeOrFail(req, leaving);
    if ("status" in access) return refuse(access);
    const o = forwardOptions(req, access);
    if ("status" in o) return refuse(o);
    try {
      await proxy.upgrade({ agentId: access.agentId, service: KUBERNETES_SERVICE }, req, socket, head, o);
      return 101;
    } catch (err) {
      return refuse(describeProxyError(err, access.agentId));
    }
  };

  return listenHttp({
    address: options.listen.address,
    tls: options.listen,
    front: "kubernetes_api",
    ...(options.log && { log: options.log }),
    ...(metrics && { metrics }),
    routeOf: (_req, upgrade) => (upgrade ? UPGRADE_ROUTE : ROUTE),
    renderError: renderStatus,
    handler: handle,
    onUpgrade: upgrade,
    ...(options.limits && { limits: options.limits }),
  });
}

/**
 * The client's leaving while kas authorizes its request. The AbortSignal is made only when a wait
 * for GitLab asks for it (aborted at once if the client already left): most requests are answered
 * from the cache, and a signal for each cost several µs of kas's CPU per request.
 */
export class Leaving {
  #left = false;
  #controller: AbortController | undefined;

  /** Whether the client has left. */
  get left(): boolean {
    return this.#left;
  }

  /** The client left (a close listener). */
  readonly leave: () => void;
  /** The signal that aborts when the client leaves. */
  readonly signal: () => AbortSignal;

  constructor() {
    // Assigned here rather than as field initializers: tsx (esbuild keepNames) names those, per request.
    this.leave = () => {
      this.#left = true;
      this.#controller?.abort();
    };
    this.signal = () => {
      this.#controller ??= new AbortController();
      if (this.#left) this.#controller.abort();
      return this.#controller.signal;
    };
  }
}

/** Client headers that never reach the agent: GitLab's credentials and any identity of the client's own. */
const notForTheCluster = (name: string): boolean =>
  CREDENTIAL_HEADERS.has(name) || isImpersonationHeader(name);

/** Failures as kubectl expects them: a Kubernetes `Status`. */
const renderStatus: ErrorRenderer = (f) => ({
  type: "application/json",
  body: `${JSON.stringify(kubeStatus(f.status, f.message, f.reason))}\n`,
});

function sendStatus(res: ServerResponse, f: ProxyFailure): void {
  sendBody(res, f.status, renderStatus(f), f.status === 401 ? UNAUTHORIZED_HEADERS : {});
}

const FOREIGN_ORIGIN = failure(
  403,
  "this origin may not call the Kubernetes API proxy (gitlab.external_url)",
);

/** kas (not the cluster) refused the credentials. */
const UNAUTHORIZED_HEADERS = { "www-authenticate": 'Bearer realm="kas"', "gitlab-unauthorized": "true" };
