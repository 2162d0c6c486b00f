import type { IncomingMessage } from "node:http";
import type { ApiRoute, ApiRoutes } from "../../../modules/runtime/index.ts";
import type { ListenConfig } from "../../../tool/config/values.ts";
import {
  type ConnectionLimits,
  type GuardLog,
  type Http2Connections,
  HttpError,
  type HttpListener,
  listenHttp,
  requestTarget,
} from "../../../tool/http/serve/index.ts";
import type { RequestMetrics } from "../../../tool/observability/index.ts";
import { ApiAuthError, createGitLabJwtVerifier, GITLAB_REQUEST_HEADER } from "./gitlab-jwt.ts";

/** GitLab's credentials are for kas, not for what a route passes requests on to. */
const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([GITLAB_REQUEST_HEADER, "authorization", "cookie"]);

/** The routes of GitLab's API, added by modules while they are built. */
export class ApiRouteTable implements ApiRoutes {
  readonly credentialHeaders = CREDENTIAL_HEADERS;
  readonly #routes: ApiRoute[] = [];

  add(route: ApiRoute): void {
    if (this.#routes.some((r) => r.route === route.route))
      throw new Error(`API route ${route.route} added twice`);
    this.#routes.push(route);
  }

  /** The route serving `pathname`, if any. */
  find(pathname: string): ApiRoute | undefined {
    return this.#routes.find((r) => r.matches(pathname));
  }
}

export interface ApiServerOptions {
  listen: ListenConfig;
  /** Shared with GitLab (api.listen.authentication_secret_file). */
  secret: Uint8Array;
  routes: ApiRouteTable;
  metrics?: RequestMetrics;
  log?: GuardLog;
  /** gRPC on the same port: where HTTP/2 connections go (`GitLabRpcServer.connections`). */
  grpc?: Http2Connections;
  /** Default `DEFAULT_CONNECTION_LIMITS`. */
  limits?: ConnectionLimits;
}

/**
 * The API GitLab calls (8153): with `grpc`, HTTP/2 connections (TLS ALPN `h2`, or cleartext with
 * the HTTP/2 preface) are gRPC, the rest HTTP/1.1 JSON. Every HTTP request carries GitLab's JWT in `Gitlab-Kas-Api-Request`;
 * without a valid one: 401. Then the route a module added for the path serves it (404 without
 * one). JSON in, JSON out; whatever fails is answered by the guard (`guardServer`).
 */
export async function serveApi(options: ApiServerOptions): Promise<HttpListener> {
  const verify = createGitLabJwtVerifier(options.secret);
  const { routes } = options;

  /** GitLab's JWT, then the route for the path; a 401 or 404 otherwise. */
  const route = async (req: IncomingMessage, upgrade: boolean): Promise<ApiRoute> => {
    try {
      await verify(req.headers[GITLAB_REQUEST_HEADER]);
    } catch (err) {
      if (!(err instanceof ApiAuthError)) throw err;
      throw new HttpError(401, err.message, { "www-authenticate": `Bearer realm="gitlab-kas"` });
    }
    const { pathname } = requestTarget(req);
    const found = routes.find(pathname);
    if (!found || (upgrade && !found.upgrade))
      throw new HttpError(404, `no such endpoint: ${req.method} ${pathname}`);
    return found;
  };

  return listenHttp({
    address: options.listen.address,
    tls: options.listen,
    front: "api",
    ...(options.log && { log: options.log }),
    ...(options.metrics && { metrics: options.metrics }),
    routeOf: (req) => routes.find(requestTarget(req).pathname)?.route ?? "unknown",
    handler: async (req, res) => (await route(req, false)).handle(req, res),
    onUpgrade: async (req, socket, head) => (await route(req, true)).upgrade!(req, socket, head),
    ...(options.grpc && { http2: options.grpc }),
    ...(options.limits && { limits: options.limits }),
  });
}
