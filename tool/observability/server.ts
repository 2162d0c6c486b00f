import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Registry } from "prom-client";
import type { ListenAddress } from "../config/values.ts";
import {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  type ErrorRenderer,
  type GuardLog,
  guardServer,
  httpServerOptions,
  limitHttpServer,
  limitReporter,
  sendBody,
} from "../http/serve/index.ts";
import { listenAt } from "../listen.ts";
import type { ReadinessChecks } from "./readiness.ts";
import { scrubString } from "./redact.ts";

export interface ObservabilityOptions {
  listen: ListenAddress;
  registry: Registry;
  readiness: ReadinessChecks;
  /** Defaults: /metrics, /liveness, /readiness (GitLab's kas names). */
  paths?: { metrics?: string; liveness?: string; readiness?: string };
  /** Liveness: the process answers. A daemon may add its own test (e.g. its event loop is not wedged). */
  live?: () => boolean;
  log?: GuardLog;
  /** Header, body and idle deadlines, connection cap. Default `DEFAULT_CONNECTION_LIMITS`. */
  limits?: ConnectionLimits;
}

export interface ObservabilityServer {
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  close(): Promise<void>;
}

/**
 * Serves Prometheus metrics and the liveness and readiness probes over plain HTTP, under the
 * guard (`guardServer`): a failing check or scrape is a 500 and a log line, never a crash.
 */
export async function serveObservability(options: ObservabilityOptions): Promise<ObservabilityServer> {
  const paths = { metrics: "/metrics", liveness: "/liveness", readiness: "/readiness", ...options.paths };
  const routeOf = (req: IncomingMessage) => {
    const path = (req.url ?? "/").split("?")[0]!;
    return [paths.metrics, paths.liveness, paths.readiness].includes(path) ? path : "unknown";
  };
  const server = createServer(httpServerOptions(options.limits ?? DEFAULT_CONNECTION_LIMITS));
  limitHttpServer(
    server,
    server,
    options.limits ?? DEFAULT_CONNECTION_LIMITS,
    limitReporter("observability", options.log),
  );
  guardServer(server, {
    front: "observability",
    ...(options.log && { log: options.log }),
    routeOf,
    renderError: plainText,
    request: handle,
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const route = routeOf(req);
    if (route === "unknown") return send(res, 404, "text/plain; charset=utf-8", "not found\n");
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("allow", "GET, HEAD");
      return send(res, 405, "text/plain; charset=utf-8", "method not allowed\n");
    }
    if (route === paths.metrics) {
      return send(res, 200, options.registry.contentType, await options.registry.metrics());
    }
    if (route === paths.liveness) {
      const live = options.live?.() ?? true;
      return send(res, live ? 200 : 503, "text/plain; charset=utf-8", live ? "ok\n" : "not live\n");
    }
    const { ok, checks } = await options.readiness.run();
    const body = JSON.stringify({
      status: ok ? "ready" : "not ready",
      checks: checks.map((c) => ({
        ...c,
        ...(c.error !== undefined && { error: scrubString(c.error) }),
        ...(c.detail !== undefined && { detail: scrubString(c.detail) }),
      })),
    });
    return send(res, ok ? 200 : 503, "application/json", `${body}\n`);
  }

  const { url, port } = await listenAt(server, options.listen, "http");
  return {
    url,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

const plainText: ErrorRenderer = ({ message }) => ({
  type: "text/plain; charset=utf-8",
  body: `${message}\n`,
});

function send(res: ServerResponse, status: number, type: string, body: string): void {
  sendBody(res, status, { type, body });
}
