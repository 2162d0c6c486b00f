// A reverse proxy from requests that arrived over the tunnel to one upstream HTTP(S) origin:
// bodies stream both ways (watch, logs -f), and an Upgrade (exec, attach, port-forward) becomes
// a raw byte splice once the upstream has said 101.
import * as http from "node:http";
import * as https from "node:https";
import type { Duplex } from "node:stream";
import { HttpError } from "../serve/http-error.ts";
import { responseHead } from "../serve/raw-answer.ts";
import { isPlainPath } from "../serve/request-target.ts";
import { endToEnd, endToEndLines, IDENTITY_HEADER, linesToHeaders } from "./hop-by-hop.ts";
import { relayBody } from "./relay-body.ts";

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
  headers: http.OutgoingHttpHeaders;
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

/** Largest error body of a refused upgrade relayed to the client. */
const MAX_REFUSAL_BODY = 64 * 1024;

export function createForwarder(upstream: Upstream, options: ForwarderOptions): Forwarder {
  const client = upstream.url.protocol === "https:" ? https : http;
  const base = upstream.url.pathname.replace(/\/+$/, "");
  const warn = (err: Error, req: http.IncomingMessage, msg: string) =>
    options.log?.warn({ err, upstream: upstream.url.origin, method: req.method }, msg);
  // A refusal (HttpError) answers with its status; anything else is the daemon's failure.
  const prepareFailure = (err: Error, req: http.IncomingMessage): [number, string] => {
    if (err instanceof HttpError) return [err.status, err.message];
    warn(err, req, "cannot prepare the upstream request");
    return [500, `cannot prepare the upstream request: ${err.message}`];
  };

  async function outgoing(req: http.IncomingMessage, upgrade: boolean): Promise<http.RequestOptions> {
    if (!isPlainPath(req.url ?? "")) throw new HttpError(400, DOT_SEGMENTS);
    const incoming = linesToHeaders(endToEndLines(req.rawHeaders, { upgrade }));
    const { agent, headers } = await upstream.prepare(
      incoming,
      req.headers[IDENTITY_HEADER] as string | undefined,
    );
    headers.host = upstream.url.host;
    if (upgrade) {
      headers.connection = "Upgrade";
      headers.upgrade = req.headers.upgrade ?? "";
    }
    return {
      protocol: upstream.url.protocol,
      hostname: upstream.url.hostname.replace(/^\[|\]$/g, ""),
      port: upstream.url.port,
      method: req.method,
      path: base + (req.url ?? "/"),
      headers,
      agent,
    };
  }

  return {
    destroy: () => upstream.destroy(),
    request(req, res) {
      const done = options.track?.();
      let status = 0;
      let failed = false;
      res.once("close", () => done?.(res.writableFinished ? status : failed ? "aborted" : CLIENT_CLOSED));
      // Once the head is out, a failure can only cut the response short: the client sees a reset.
      const failMidway = (err: Error) => {
        if (res.destroyed) return; // the client went first, and its leaving caused this
        failed = true;
        warn(err, req, "upstream response failed midway; the response was cut short");
        res.destroy();
      };
      const fail = (code: number, message: string) => {
        status = code;
        const { contentType, body } = options.errorBody(code, message);
        res
          .writeHead(code, { "content-type": contentType, "content-length": Buffer.byteLength(body) })
          .end(body);
      };
      outgoing(req, false).then(
        (opts) => {
          const up = client.request(opts);
          up.on("error", (err) => {
            if (res.headersSent) return failMidway(err);
            if (res.destroyed) return;
            warn(err, req, "upstream request failed");
            fail(502, `upstream ${upstream.url.host} failed: ${err.message}`);
          });
          up.on("response", (ur) => {
            // An answer node:http's client reads but its server would refuse to write (a status
            // below 100, control characters in the reason) is the upstream's fault, not a crash.
            const head = relayableHead(ur);
            try {
              if (head === undefined) throw new Error(`invalid status line ${JSON.stringify(ur.statusCode)}`);
              status = head.status;
              res.writeHead(status, head.message, endToEnd(ur.headers));
            } catch (err) {
              ur.destroy();
              warn(err as Error, req, "upstream answered with a response that cannot be relayed");
              return fail(
                502,
                `upstream ${upstream.url.host} answered with a response that cannot be relayed`,
              );
            }
            ur.on("error", failMidway); // before the relay's own listener: counted as "aborted"
            // Failures are seen by failMidway above, or by the close listener below (the client left).
            relayBody(ur, res).catch(() => {});
          });
          // The client went away (or the stream was reset) before the response finished.
          res.once("close", () => {
            if (!res.writableFinished) up.destroy();
          });
          req.pipe(up);
        },
        (err: Error) => {
          if (res.destroyed) return;
          const [status, message] = prepareFailure(err, req);
          fail(status, message);
        },
      );
    },

    upgrade(req, socket, head) {
      const track = options.track?.();
      let tracked = false;
      const done = (outcome: RequestOutcome) => {
        if (!tracked) track?.(outcome);
        tracked = true;
      };
      socket.on("error", () => socket.destroy());
      // Before an answer: the client left. After one: already recorded, so this does nothing.
      socket.once("close", () => done(CLIENT_CLOSED));
      const refuse = (code: number, message: string) => {
        done(code);
        const { contentType, body } = options.errorBody(code, message);
        socket.end(
          responseHead(code, http.STATUS_CODES[code] ?? "", {
            "content-type": contentType,
            "content-length": String(Buffer.byteLength(body)),
          }) + body,
        );
      };
      outgoing(req, true).then(
        (opts) => {
          const up = client.request(opts);
          socket.once("close", () => up.destroy());
          up.on("error", (err) => {
            if (socket.destroyed) return;
            warn(err, req, "upstream request failed");
            refuse(502, `upstream ${upstream.url.host} failed: ${err.message}`);
          });
          up.on("upgrade", (ur, upSocket, upHead) => {
            done(101);
            const headers = { ...ur.headers };
            socket.write(responseHead(101, relayableHead(ur)?.message ?? "Switching Protocols", headers));
            if (upHead.length > 0) socket.write(upHead);
            if (head.length > 0) upSocket.write(head);
            upSocket.on("error", (err) => {
              if (!socket.destroyed) warn(err, req, "upstream connection of an upgraded request failed");
              socket.destroy();
            });
            socket.on("error", () => upSocket.destroy());
            upSocket.once("close", () => socket.destroy());
            socket.once("close", () => upSocket.destroy());
            upSocket.pipe(socket);
            socket.pipe(upSocket);
          });
          // Upgrade refused (401, 403, 404, 400…): relay the answer and close.
          up.on("response", (ur) => {
            const chunks: Buffer[] = [];
            let size = 0;
            ur.on("data", (c: Buffer) => {
              size += c.length;
              if (size <= MAX_REFUSAL_BODY) chunks.push(c);
            });
            ur.on("error", (err) => {
              if (socket.destroyed) return;
              done("aborted");
              warn(err, req, "upstream refusal of an upgrade failed midway");
              socket.destroy();
            });
            ur.once("end", () => {
              const body = Buffer.concat(chunks);
              const headers = {
                ...endToEnd(ur.headers),
                "content-length": String(body.length),
                connection: "close",
              };
              const head = relayableHead(ur) ?? { status: 502, message: "Bad Gateway" };
              done(head.status);
              socket.end(
                Buffer.concat([Buffer.from(responseHead(head.status, head.message, headers)), body]),
              );
            });
          });
          up.end();
        },
        (err: Error) => {
          if (socket.destroyed) return;
          refuse(...prepareFailure(err, req));
        },
      );
    },
  };
}

/** Printable reason phrases only (RFC 9112 4: HTAB, SP, VCHAR, obs-text). */
const REASON = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The upstream's status and reason as they may be written on: undefined for a status outside
 * 100-999; a reason with other characters is replaced by the status's standard one.
 */
function relayableHead(ur: http.IncomingMessage): { status: number; message: string } | undefined {
  const status = ur.statusCode;
  if (status === undefined || !Number.isInteger(status) || status < 100 || status > 999) return undefined;
  const reason = ur.statusMessage ?? "";
  return { status, message: REASON.test(reason) ? reason : (http.STATUS_CODES[status] ?? "") };
}
