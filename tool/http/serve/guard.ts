import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ClientGoneError } from "./client-gone.ts";
import { HttpError } from "./http-error.ts";
import { type Body, rawAnswer } from "./raw-answer.ts";

/** A front's request handler. It may throw or reject: the guard answers for it. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/**
 * Answers an Upgrade request on the raw socket and settles, once the exchange is over, with the
 * status it answered (for the metrics). It may throw or reject: the guard answers for it.
 */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => number | Promise<number>;

/** An error answer: status and a message safe to show the caller; fronts may add a reason (Kubernetes'). */
/** Times each request by route and records how it ended (observability's RequestMetrics is one). */
export interface RouteTimer {
  start(route: string): (status: number | string) => void;
}

export interface ErrorAnswer {
  status: number;
  message: string;
  reason?: string;
}

/** Renders an error answer in a front's format (JSON `{"error": …}`, a Kubernetes Status, plain text). */
export type ErrorRenderer = (answer: ErrorAnswer) => Body;

/** The fronts' default error format: `{"error": message}`. */
export const jsonError: ErrorRenderer = ({ message }) => ({
  type: "application/json",
  body: `${JSON.stringify({ error: message })}\n`,
});

export interface GuardLog {
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface GuardOptions {
  /** Names the front in log lines, e.g. "api". */
  front: string;
  log?: GuardLog;
  /**
   * The route template a request is for (never the raw path: it may carry anything), for logs and
   * metrics; `upgrade` for Upgrade (and CONNECT) requests. Default "unknown".
   */
  routeOf?: (req: IncomingMessage, upgrade: boolean) => string;
  /**
   * Every request is recorded with its route and one of: the HTTP status, when the response was
   * complete (for an Upgrade, what the handler says); 499, the client left before it was;
   * "aborted", the response failed after its headers were out (a failed upstream, a bug).
   */
  metrics?: RouteTimer;
  /** Default {@link jsonError}. */
  renderError?: ErrorRenderer;
}

export interface GuardedHandlers extends GuardOptions {
  request: RequestHandler;
  /** Without it, Upgrade requests are plain requests (node:http's behaviour). */
  upgrade?: UpgradeHandler;
}

/**
 * Serves `server`'s requests, Upgrades and CONNECTs through the guard: whatever a handler throws
 * or rejects with becomes an answer (an {@link HttpError}'s status, else 500) in the front's
 * format, or a reset when its headers were already out, plus a log line with the front, method
 * and route. No request failure reaches the process. CONNECT, which no front serves, is a 405
 * (node:http would drop the connection without a word).
 */
export function guardServer(server: Server, handlers: GuardedHandlers): void {
  server.on("request", guardRequests(handlers.request, handlers));
  if (handlers.upgrade) server.on("upgrade", guardUpgrades(handlers.upgrade, handlers));
  server.on(
    "connect",
    guardUpgrades(() => {
      throw new HttpError(405, "CONNECT is not supported here");
    }, handlers),
  );
}

/** A 'request' listener running `handler` under the guard (see {@link guardServer}). */
export function guardRequests(handler: RequestHandler, o: GuardOptions) {
  const render = o.renderError ?? jsonError;
  return (req: IncomingMessage, res: ServerResponse): void => {
    const route = routeOf(o, req, false);
    const end = o.metrics?.start(route);
    let aborted = false;
    const closed = new Promise<void>((resolve) => res.once("close", resolve));
    const settled = attempt(() => handler(req, res)).catch((err: unknown) => {
      // Failed after answering in full: nothing to take back, but never silent.
      if (res.writableEnded) return report(o, err, req, route, false);
      report(o, err, req, route, res.headersSent);
      if (res.headersSent) {
        aborted = true;
        res.destroy();
      } else {
        const answer = answerOf(err);
        sendBody(res, answer.status, render(answer), answer.headers);
      }
    });
    // Recorded once both the response closed and the handler settled: only then is a failure known.
    if (end) {
      void Promise.all([closed, settled]).then(() =>
        end(aborted ? "aborted" : res.writableFinished ? res.statusCode : 499),
      );
    }
  };
}

/** An 'upgrade' (or 'connect') listener running `handler` under the guard (see {@link guardServer}). */
export function guardUpgrades(handler: UpgradeHandler, o: GuardOptions) {
  const render = o.renderError ?? jsonError;
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const route = routeOf(o, req, true);
    const end = o.metrics?.start(route);
    // node:http hands the socket over without its error listener: a reset must not become an uncaught error.
    socket.on("error", (err) => o.log?.debug({ err, front: o.front, route }, "upgrade connection error"));
    attempt(() => handler(req, socket, head)).then(
      (status) => end?.(status),
      (err: unknown) => {
        const written = ((socket as { bytesWritten?: number }).bytesWritten ?? 0) > 0;
        report(o, err, req, route, written);
        if (err instanceof ClientGoneError) {
          socket.destroy();
          end?.(499);
          return;
        }
        if (written) {
          socket.destroy();
          end?.("aborted");
          return;
        }
        const answer = answerOf(err);
        rawAnswer(socket, answer.status, render(answer), answer.headers);
        end?.(answer.status);
      },
    );
  };
}

/** Writes a whole response (no body for HEAD); nothing when the client is gone already. */
export function sendBody(
  res: ServerResponse,
  status: number,
  { type, body }: Body,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.destroyed) return;
  res.writeHead(status, {
    ...headers,
    "content-type": type,
    "cache-control": "no-store",
    "content-length": Buffer.byteLength(body),
  });
  res.end(res.req.method === "HEAD" ? undefined : body);
}

/** A whole JSON response. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  sendBody(res, status, { type: "application/json", body: `${JSON.stringify(body)}\n` }, headers);
}

/** Runs `fn`; a synchronous throw becomes a rejection. */
function attempt<T>(fn: () => T | Promise<T>): Promise<T> {
  return new Promise<T>((resolve) => resolve(fn()));
}

function routeOf(o: GuardOptions, req: IncomingMessage, upgrade: boolean): string {
  try {
    return o.routeOf?.(req, upgrade) ?? "unknown";
  } catch {
    return "unknown";
  }
}

function answerOf(err: unknown): ErrorAnswer & { headers: Readonly<Record<string, string>> } {
  if (err instanceof HttpError) return { status: err.status, message: err.message, headers: err.headers };
  return { status: 500, message: "internal error", headers: {} };
}

function report(o: GuardOptions, err: unknown, req: IncomingMessage, route: string, midway: boolean): void {
  const context = { err, front: o.front, method: req.method, route };
  // A client leaving is no failure of the daemon's, and anyone can do it at will: never above debug.
  if (err instanceof ClientGoneError)
    o.log?.debug({ front: o.front, method: req.method, route }, "client went away");
  else if (err instanceof HttpError && !midway) o.log?.debug(context, "request refused");
  else if (midway) o.log?.error(context, "response failed midway");
  else o.log?.error(context, "request failed");
}
