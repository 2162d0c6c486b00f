// What the forwarder's two paths share: the upstream and the options, the outgoing request built
// from an incoming one, how a failure to prepare it answers, and what of the upstream's status line
// may be relayed.
import * as http from "node:http";
import * as https from "node:https";
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import { HttpError } from "../serve/http-error.ts";
import { isPlainPath } from "../serve/request-target.ts";
import { endToEndLines, IDENTITY_HEADER, linesToHeaders } from "./hop-by-hop.ts";

export interface Upstream {
  /** Base URL; request paths are appended to its path (e.g. an API server behind a path prefix). */
  url: URL;
  /**
   * Per request: the agent to send it with (the connection pool, holding the TLS settings) and
   * the headers, from the (already hop-by-hop-free) incoming ones and the identity kas sent
   * (`Kas-Identity`, read before any hop-by-hop rule; undefined when none came). On every
   * request's path, so whatever it reads (credentials, certificates) it caches. Throws an
   * HttpError to refuse the request with its status.
   */
  prepare(
    incoming: http.OutgoingHttpHeaders,
    identity: string | undefined,
  ): UpstreamRequest | Promise<UpstreamRequest>;
  /** Closes the pooled upstream connections. */
  destroy(): void;
}

export interface UpstreamRequest {
  agent: http.Agent;
  /**
   * The same upstream through undici, for plain requests (node:http's client costs more per
   * request); absent: they go through `agent` too. Upgrades always go through `agent`.
   */
  dispatcher?: Dispatcher;
  headers: http.OutgoingHttpHeaders;
}

/** The request to send upstream, and the undici dispatcher plain requests go through, if any. */
export interface Outgoing {
  options: http.RequestOptions;
  dispatcher?: Dispatcher;
}

/**
 * How a request ended, for the metrics: the upstream's status once the response was complete;
 * "aborted" when it failed after its headers were out (the body is cut short: never counted as
 * the status it started with); 499 when the client went away first.
 */
export type RequestOutcome = number | "aborted";

/** 499 (nginx's "client closed request"): the client went away before the response was complete. */
export const CLIENT_CLOSED = 499;

export interface ForwarderOptions {
  /** Body of an error the proxy itself answers with (upstream unreachable, bad credentials). */
  errorBody(status: number, message: string): { contentType: string; body: string };
  /** Called as each request starts; what it returns is called once with how the request ended. */
  track?(): (outcome: RequestOutcome) => void;
  log?: { warn(obj: object, msg: string): void };
}

export interface Forwarder {
  request: http.RequestListener;
  upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Closes the pooled upstream connections. */
  destroy(): void;
}

/** Why a request target with dot segments or encoded separators is refused. */
export const DOT_SEGMENTS = "the request path may not contain dot segments or encoded separators";

/** One forwarder's upstream, options and helpers, shared by requests and upgrades. */
export interface ForwardContext {
  upstream: Upstream;
  options: ForwarderOptions;
  /** http or https, as the upstream's URL says. */
  client: typeof http | typeof https;
  warn(err: Error, req: http.IncomingMessage, msg: string): void;
  /** A refusal (HttpError) answers with its status; anything else is the daemon's failure. */
  prepareFailure(err: Error, req: http.IncomingMessage): [number, string];
  /** The request to send upstream for `req` (rejects with an HttpError to refuse it). */
  outgoing(req: http.IncomingMessage, upgrade: boolean): Promise<Outgoing>;
}

export function forwardContext(upstream: Upstream, options: ForwarderOptions): ForwardContext {
  const base = upstream.url.pathname.replace(/\/+$/, "");
  const warn = (err: Error, req: http.IncomingMessage, msg: string) =>
    options.log?.warn({ err, upstream: upstream.url.origin, method: req.method }, msg);
  return {
    upstream,
    options,
    client: upstream.url.protocol === "https:" ? https : http,
    warn,
    prepareFailure(err, req) {
      if (err instanceof HttpError) return [err.status, err.message];
      warn(err, req, "cannot prepare the upstream request");
      return [500, `cannot prepare the upstream request: ${err.message}`];
    },
    outgoing: (req, upgrade) => outgoing(upstream, base, req, upgrade),
  };
}

async function outgoing(
  upstream: Upstream,
  base: string,
  req: http.IncomingMessage,
  upgrade: boolean,
): Promise<Outgoing> {
  if (!isPlainPath(req.url ?? "")) throw new HttpError(400, DOT_SEGMENTS);
  const incoming = linesToHeaders(endToEndLines(req.rawHeaders, { upgrade }));
  const { agent, dispatcher, headers } = await upstream.prepare(
    incoming,
    req.headers[IDENTITY_HEADER] as string | undefined,
  );
  headers.host = upstream.url.host;
  if (upgrade) {
    headers.connection = "Upgrade";
    headers.upgrade = req.headers.upgrade ?? "";
  }
  const options: http.RequestOptions = {
    protocol: upstream.url.protocol,
    hostname: upstream.url.hostname.replace(/^\[|\]$/g, ""),
    port: upstream.url.port,
    method: req.method,
    path: base + (req.url ?? "/"),
    headers,
    agent,
  };
  return dispatcher === undefined ? { options } : { options, dispatcher };
}

/** Printable reason phrases only (RFC 9112 4: HTAB, SP, VCHAR, obs-text). */
const REASON = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The upstream's status and reason as they may be written on: undefined for a status outside
 * 100-999; a reason with other characters is replaced by the status's standard one.
 */
export function relayableHead(
  ur: Pick<http.IncomingMessage, "statusCode" | "statusMessage">,
): { status: number; message: string } | undefined {
  const status = ur.statusCode;
  if (status === undefined || !Number.isInteger(status) || status < 100 || status > 999) return undefined;
  const reason = ur.statusMessage ?? "";
  return { status, message: REASON.test(reason) ? reason : (http.STATUS_CODES[status] ?? "") };
}
