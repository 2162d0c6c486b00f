import { readFile } from "node:fs/promises";
import * as http from "node:http";
import * as https from "node:https";
import type { Server } from "node:net";
import type { Duplex } from "node:stream";
import type { ListenAddress, TlsFiles } from "../../config/values.ts";
import { listenAt } from "../../listen.ts";
import {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  httpServerOptions,
  limitHttpServer,
} from "./connection-limits.ts";
import {
  type GuardOptions,
  guardServer,
  type RequestHandler,
  type RouteTimer,
  type UpgradeHandler,
} from "./guard.ts";
import { HttpError } from "./http-error.ts";
import { type LimitCounter, limitReporter } from "./limit-report.ts";
import { createProtocolSplitServer } from "./protocol-split.ts";

/** Where HTTP/2 connections go when HTTP/1.1 and HTTP/2 share the port (e.g. a gRPC server). */
export interface Http2Connections {
  /** A connection whose client speaks HTTP/2 (TLS ALPN `h2`, or the cleartext preface). */
  serve(socket: Duplex): void;
  /** Ends the served connections: what is in flight gets `graceMs`. */
  close(graceMs: number): Promise<void>;
}

export interface HttpListenOptions extends GuardOptions {
  /** Request timing and the count of connections closed for a limit (observability's RequestMetrics). */
  metrics?: RouteTimer & LimitCounter;
  address: ListenAddress;
  /** Serve HTTPS with these PEM files. */
  tls?: TlsFiles;
  handler: RequestHandler;
  /** Requests with `Connection: Upgrade` (exec, attach, port-forward, WebSocket). */
  onUpgrade?: UpgradeHandler;
  /** Serve HTTP/2 on the same port, by handing those connections here (`createProtocolSplitServer`). */
  http2?: Http2Connections;
  /** Header, body and idle deadlines and the connection cap. Default {@link DEFAULT_CONNECTION_LIMITS}. */
  limits?: ConnectionLimits;
}

export interface HttpListener {
  readonly url: string;
  readonly port: number;
  readonly server: http.Server;
  /**
   * The first step of a drain, while load balancers still send here: keeps accepting and serving,
   * but every response from now on says `Connection: close`, so kept-alive connections end
   * cleanly after their next exchange instead of being closed under a request.
   */
  drain(): void;
  /**
   * Stops accepting, closes idle keep-alive connections, lets requests in flight (and upgraded
   * connections) finish for up to `graceMs`, then cuts what is left.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * An HTTP/1.1 front (API, Kubernetes API proxy) that can drain gracefully. Handlers run under the
 * guard (`guardServer`): a failure becomes an answer in the front's format and a log line, never
 * a crash; the guard also records the request metrics.
 */
export async function listenHttp(options: HttpListenOptions): Promise<HttpListener> {
  const inFlight = new Set<http.ServerResponse>();
  const upgraded = new Set<Duplex>();
  let closing = false;
  /** Set by `drain` (and `close`): responses say `Connection: close`. */
  let draining = false;
  let settled: (() => void) | undefined;
  const checkDrained = () => {
    if (closing && inFlight.size === 0 && upgraded.size === 0) settled?.();
  };

  const track = (res: http.ServerResponse) => {
    inFlight.add(res);
    if (draining) res.shouldKeepAlive = false;
    res.once("close", () => {
      inFlight.delete(res);
      if (closing) setImmediate(() => server.closeIdleConnections());
      checkDrained();
    });
  };
  const onUpgrade = options.onUpgrade;
  const tls = options.tls?.certificateFile && options.tls.keyFile ? options.tls : undefined;
  const keyPair = tls && { cert: await readFile(tls.certificateFile!), key: await readFile(tls.keyFile!) };
  const { http2 } = options;
  const limits = options.limits ?? DEFAULT_CONNECTION_LIMITS;
  // Deadlines on receiving requests only: watches and `logs -f` answer for as long as they need.
  const serverOptions = httpServerOptions(limits);
  // With HTTP/2 beside it, the HTTP server listens on no socket: the front hands it connections.
  const server: http.Server =
    keyPair && !http2
      ? https.createServer({ ...keyPair, ...serverOptions, handshakeTimeout: limits.headerTimeoutMs })
      : http.createServer(serverOptions);
  const front: Server = http2
    ? createProtocolSplitServer({
        ...(keyPair && { tls: keyPair }),
        http1: (socket) => server.emit("connection", socket),
        http2: (socket) => http2.serve(socket),
        firstBytesTimeoutMs: limits.headerTimeoutMs,
      })
    : server;
  limitHttpServer(server, front, limits, limitReporter(options.front, options.log, options.metrics));
  guardServer(server, {
    ...options,
    request: (req, res) => {
      track(res);
      return options.handler(req, res);
    },
    ...(onUpgrade && {
      upgrade: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
        if (closing) throw new HttpError(503, "shutting down");
        upgraded.add(socket);
        socket.once("close", () => {
          upgraded.delete(socket);
          checkDrained();
        });
        return onUpgrade(req, socket, head);
      },
    }),
  });

  const { url, port } = await listenAt(front, options.address, tls ? "https" : "http");
  // Node's HTTP server starts tracking its connections (idle ones, header timeouts) on "listening".
  if (front !== server) server.emit("listening");

  const drain = () => {
    draining = true;
    for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
  };
  return {
    url,
    port,
    server,
    drain,
    async close(graceMs = 30_000) {
      if (closing) return;
      closing = true;
      drain();
      const stopped = new Promise<void>((resolve) => front.close(() => resolve()));
      const http2Closed = http2?.close(graceMs);
      if (front !== server) server.close(() => {}); // stops its connection checks (it listens on nothing)
      server.closeIdleConnections();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        timer.unref();
        settled = () => {
          clearTimeout(timer);
          resolve();
        };
        checkDrained();
      });
      server.closeAllConnections();
      for (const socket of upgraded) socket.destroy();
      await http2Closed;
      await stopped;
    },
  };
}
