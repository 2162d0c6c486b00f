// The dashboard's listener: a login page, the page's shell and bundle, every agent's views as JSON
// (`/api/agents`) and as a live event stream (`/api/events`, SSE, from the views hub). With a token
// configured, everything but the login page and the static bundle needs a session cookie.
import type { IncomingMessage, ServerResponse } from "node:http";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import type { ListenConfig } from "../../../tool/config/values.ts";
import {
  type ConnectionLimits,
  type EventStream,
  type GuardLog,
  HttpError,
  type HttpListener,
  listenHttp,
  requestTarget,
} from "../../../tool/http/serve/index.ts";
import type { RequestMetrics } from "../../../tool/observability/index.ts";
import { serveEvents, type ViewsHub } from "../../cluster_views/index.ts";
import type { AgentStatuses } from "./agent-status.ts";
import type { DashboardAssets } from "./assets.ts";
import type { HistoryStore } from "./history-store.ts";
import { appPage, CONTENT_SECURITY_POLICY, FAVICON, loginPage } from "./pages.ts";
import { MemoryRevocations, type SessionRevocations } from "./revocations.ts";
import { type DashboardSessions, dashboardSessions } from "./session.ts";

/** A login form is a few bytes: more is not one. */
const MAX_LOGIN_BODY = 4096;
/** Login attempts from one address are counted over this window. */
const LOGIN_WINDOW_S = 300;

export interface DashboardServerOptions {
  listen: ListenConfig;
  /** Absent: no login (allowed on loopback only; the configuration checks that). */
  token?: string;
  sessionTtlMs: number;
  /** Part of the sessions' signing key: raising it ends every session at once (default 1). */
  sessionGeneration?: number;
  /** Where logouts are recorded (default: this process's memory; with Redis, every replica's). */
  revocations?: SessionRevocations;
  hub: ViewsHub;
  /** Who each agent is, its tunnels, configuration and GitOps (`/api/status`); absent: views only. */
  statuses?: AgentStatuses;
  /** Each agent's history (`/api/changes`, `/api/history`); absent: none kept. */
  history?: HistoryStore;
  assets: DashboardAssets;
  heartbeatMs?: number;
  /**
   * Wrong tokens one client address may give per 5 minutes before logins from it get 429 (default
   * 10). Each attempt is counted before its token is compared; a right token gives its back.
   */
  maxLoginFailures?: number;
  /** Event streams served at most (default 1000); beyond, 503. */
  maxStreams?: number;
  /** Per event stream (default 1 MiB). */
  maxBufferedBytes?: number;
  log: GuardLog & { info(obj: object, msg: string): void };
  metrics?: RequestMetrics;
  /** Told how many event streams are open, at each change. */
  onStreams?: (open: number) => void;
  /** Told of each stream cut for being too slow, or by the hub. */
  onDrop?: (reason: string) => void;
  /** Header, body (the login form's included) and idle deadlines, connection cap. Default `DEFAULT_CONNECTION_LIMITS`. */
  limits?: ConnectionLimits;
}

export interface DashboardServer {
  readonly url: string;
  /** Open event streams. */
  readonly streams: number;
  /** Ends every event stream (browsers reconnect elsewhere), then closes the listener gracefully. */
  close(graceMs: number): Promise<void>;
}

/** Changes listed by `/api/changes` (every agent's, newest first). */
export const FEED_LIMIT = 100;

const ROUTES = [
  "/",
  "/login",
  "/logout",
  "/app.js",
  "/app.css",
  "/favicon.ico",
  "/favicon.svg",
  "/api/agents",
  "/api/events",
  "/api/status",
  "/api/changes",
  "/api/history",
];
const API = new Set(["/api/agents", "/api/events", "/api/status", "/api/changes", "/api/history"]);

export async function serveDashboard(o: DashboardServerOptions): Promise<DashboardServer> {
  const tls = o.listen.certificateFile !== undefined;
  const revocations = o.revocations ?? new MemoryRevocations();
  const sessions =
    o.token === undefined
      ? undefined
      : dashboardSessions(o.token, {
          ttlMs: o.sessionTtlMs,
          secure: tls,
          ...(o.sessionGeneration !== undefined && { generation: o.sessionGeneration }),
          revocations,
        });
  const events = eventStreams(o, revocations);
  const attempts = new RateLimiterMemory({ points: o.maxLoginFailures ?? 10, duration: LOGIN_WINDOW_S });
  const listener: HttpListener = await listenHttp({
    address: o.listen.address,
    tls: o.listen,
    front: "dashboard",
    log: o.log,
    ...(o.metrics && { metrics: o.metrics }),
    routeOf: (req) => {
      const { pathname } = requestTarget(req);
      return ROUTES.includes(pathname) ? pathname : "unknown";
    },
    handler: (req, res) => handle(o, sessions, attempts, events, req, res),
    ...(o.limits && { limits: o.limits }),
  });

  return {
    url: listener.url,
    get streams() {
      return events.size;
    },
    async close(graceMs) {
      events.close();
      await listener.close(graceMs);
    },
  };
}

/** Every route of the dashboard. */
async function handle(
  o: DashboardServerOptions,
  sessions: DashboardSessions | undefined,
  attempts: RateLimiterMemory,
  events: EventStreams,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  res.setHeader("content-security-policy", CONTENT_SECURITY_POLICY);
  res.setHeader("x-content-type-options", "nosniff");
  res.setHeader("referrer-policy", "no-referrer");
  // Without a token the page is served on loopback only; a web page elsewhere could still reach
  // it by rebinding a name of its own to 127.0.0.1, unless names other than loopback's are refused.
  if (sessions === undefined && !isLoopbackHost(req.headers.host))
    throw new HttpError(403, "without a token the dashboard answers only to localhost, 127.0.0.1 and [::1]");
  const { pathname } = requestTarget(req);
  const method = req.method ?? "GET";
  if (pathname === "/app.js" || pathname === "/app.css") {
    allow(method, ["GET", "HEAD"]);
    const type = pathname === "/app.js" ? "text/javascript" : "text/css";
    return send(res, 200, type, o.assets[pathname.slice(1) as keyof DashboardAssets], "no-cache");
  }
  if (pathname === "/favicon.ico" || pathname === "/favicon.svg") {
    allow(method, ["GET", "HEAD"]);
    return send(res, 200, "image/svg+xml", FAVICON, "max-age=86400");
  }
  if (pathname === "/login") return login(req, res, method, sessions, attempts);
  if (pathname === "/logout") {
    allow(method, ["POST"]);
    // Clearing the cookie is not enough: whoever copied it could go on using it.
    await sessions?.revoke(req);
    res.setHeader("set-cookie", sessions?.clear ?? []);
    return redirect(res, sessions ? "/login" : "/");
  }
  const session = await sessions?.of(req);
  const loggedIn = sessions === undefined || session !== undefined;
  if (pathname === "/") {
    allow(method, ["GET", "HEAD"]);
    if (!loggedIn) return redirect(res, "/login");
    return send(res, 200, "text/html; charset=utf-8", appPage(sessions !== undefined), "no-store");
  }
  if (API.has(pathname)) {
    allow(method, ["GET"]);
    if (!loggedIn) throw new HttpError(401, "log in first: no valid dashboard session");
    if (pathname === "/api/events") return events.open(req, res, session?.id);
    return sendJson(res, await api(o, pathname, requestTarget(req).query));
  }
  throw new HttpError(404, `no such page: ${pathname}`);
}

/** The JSON API's answers (GET, logged in). */
async function api(o: DashboardServerOptions, pathname: string, query: URLSearchParams): Promise<object> {
  switch (pathname) {
    case "/api/agents":
      return { agents: await o.hub.list() };
    case "/api/status": {
      const ids = (await o.hub.list()).map((a) => a.agentId);
      return { agents: (await o.statuses?.of(ids)) ?? [] };
    }
    case "/api/changes": {
      const ids = (await o.hub.list()).map((a) => a.agentId);
      return { changes: (await o.history?.latestChanges(ids, FEED_LIMIT)) ?? [] };
    }
    default: {
      const agentId = query.get("agent") ?? "";
      if (!/^[1-9]\d{0,18}$/.test(agentId)) throw new HttpError(400, "agent must be an agent's numeric id");
      return (await o.history?.history(agentId)) ?? { agentId, samples: [], changes: [] };
    }
  }
}

function sendJson(res: ServerResponse, body: object): void {
  send(res, 200, "application/json", JSON.stringify(body), "no-store");
}

/** The open event streams, each session's among them: a logout (here or on another replica) ends those. */
interface EventStreams {
  readonly size: number;
  /** Serves `/api/events` (503 beyond `maxStreams`). */
  open(req: IncomingMessage, res: ServerResponse, sessionId: string | undefined): void;
  /** Ends every stream and stops hearing of logouts. */
  close(): void;
}

function eventStreams(o: DashboardServerOptions, revocations: SessionRevocations): EventStreams {
  const streams = new Set<EventStream>();
  const streamsOf = new Map<string, Set<EventStream>>();
  const stopHearing = revocations.onRevoked((id) => {
    for (const stream of streamsOf.get(id) ?? []) stream.close("logged out");
  });
  const open = (req: IncomingMessage, res: ServerResponse, sessionId: string | undefined) => {
    const max = o.maxStreams ?? 1000;
    if (streams.size >= max) {
      throw new HttpError(503, `the dashboard serves its maximum of ${max} event streams`, {
        "retry-after": "5",
      });
    }
    // Not awaited: the stream outlives this handler; `streams` follows it.
    void serveEvents(
      req,
      res,
      {},
      {
        hub: o.hub,
        heartbeatMs: o.heartbeatMs ?? 15_000,
        maxBufferedBytes: o.maxBufferedBytes ?? 1024 * 1024,
        onOpen: (stream) => {
          streams.add(stream);
          if (sessionId !== undefined) {
            const ofSession = streamsOf.get(sessionId) ?? new Set();
            streamsOf.set(sessionId, ofSession.add(stream));
          }
          o.onStreams?.(streams.size);
        },
        onClose: (reason, stream) => {
          streams.delete(stream);
          const ofSession = sessionId === undefined ? undefined : streamsOf.get(sessionId);
          if (ofSession?.delete(stream) && ofSession.size === 0) streamsOf.delete(sessionId!);
          o.onStreams?.(streams.size);
          if (reason === "too slow" || reason.startsWith("dropped: ")) o.onDrop?.(reason);
        },
      },
    );
  };
  return {
    get size() {
      return streams.size;
    },
    open,
    close() {
      stopHearing();
      for (const stream of [...streams]) stream.close("shutting down");
    },
  };
}

async function login(
  req: IncomingMessage,
  res: ServerResponse,
  method: string,
  sessions: DashboardSessions | undefined,
  attempts: RateLimiterMemory,
): Promise<void> {
  allow(method, ["GET", "HEAD", "POST"]);
  if (!sessions) return redirect(res, "/");
  if (method !== "POST") return send(res, 200, "text/html; charset=utf-8", loginPage(), "no-store");
  const type = req.headers["content-type"]?.split(";")[0]?.trim();
  if (type !== "application/x-www-form-urlencoded") throw new HttpError(415, "expected a login form");
  // Guessing the token is slowed down to a few tries per address and window. The try is taken
  // before the body is even read: counted only once it failed, a burst of concurrent guesses
  // would all be compared before the first of them counted.
  const client = req.socket.remoteAddress ?? "unknown";
  await takeAttempt(attempts, client);
  const token = new URLSearchParams(await readBody(req, MAX_LOGIN_BODY)).get("token") ?? "";
  if (!sessions.tokenMatches(token)) {
    return send(res, 401, "text/html; charset=utf-8", loginPage("Wrong token: try again."), "no-store");
  }
  // Only wrong tokens count against the address: whoever knows the token is not slowed down.
  await attempts.reward(client, 1);
  res.setHeader("set-cookie", await sessions.issue());
  return redirect(res, "/");
}

/** Takes one login attempt of `client`'s, or refuses with 429 and when to try again. */
async function takeAttempt(attempts: RateLimiterMemory, client: string): Promise<void> {
  try {
    await attempts.consume(client, 1);
  } catch (err) {
    if (!(err instanceof RateLimiterRes)) throw err;
    const retryAfter = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
    throw new HttpError(429, `too many wrong tokens: try again in ${retryAfter} s`, {
      "retry-after": String(retryAfter),
    });
  }
}

function allow(method: string, methods: string[]): void {
  if (!methods.includes(method))
    throw new HttpError(405, `${method} is not allowed here`, { allow: methods.join(", ") });
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, cache: string): void {
  res.writeHead(status, {
    "content-type": type,
    "cache-control": cache,
    "content-length": Buffer.byteLength(body),
  });
  res.end(res.req.method === "HEAD" ? undefined : body);
}

function redirect(res: ServerResponse, location: string): void {
  res.writeHead(303, { location, "cache-control": "no-store", "content-length": 0 });
  res.end();
}

async function readBody(req: IncomingMessage, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw new HttpError(413, `a login form is at most ${max} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Whether a Host header names this machine's loopback (any port). */
function isLoopbackHost(host: string | undefined): boolean {
  const name = /^(\[[^\]]*\]|[^:]*)(:\d+)?$/.exec(host ?? "")?.[1]?.toLowerCase();
  return name === "localhost" || name === "127.0.0.1" || name === "[::1]";
}
