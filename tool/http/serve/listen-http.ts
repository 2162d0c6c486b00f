import { readFile } from "node:fs/promises";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
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
import { createProtocolSplitServer, type ProtocolSplitServer } from "./protocol-split.ts";

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
  /**
   * Once closing: a connection with nothing in flight is closed when it has been quiet (no request
   * since it was accepted or since its last response) this long. Default {@link CLOSE_QUIET_MS}.
   */
  closeQuietMs?: number;
}

/**
 * How long a connection must have been quiet before a closing front closes it. A client sends on
 * a connection it has just opened, or just had an answer on, within moments; one quiet for this
 * long has none on its way (see `close`).
 */
export const CLOSE_QUIET_MS = 1000;

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
   * Stops accepting; lets requests in flight (and upgraded connections) finish for up to
   * `graceMs`, then cuts what is left. Connections with nothing in flight are closed once quiet
   * (`closeQuietMs`), not at once: one accepted just before, or that has just had its answer,
   * may have its client's next request on the way, which is answered (`Connection: close`).
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
  /** Every HTTP/1 connection: its requests in flight, and since when it has been quiet. */
  const connections = new Map<Duplex, { busy: number; quietSince: number }>();
  const quietMs = options.closeQuietMs ?? CLOSE_QUIET_MS;
  let closing = false;
  /** Set by `drain` (and `close`): responses say `Connection: close`. */
  let draining = false;

  /** Once closing: closes the connections quiet for `quietMs`, and looks again when the next one will be. */
  let sweepTimer: NodeJS.Timeout | undefined;
  const sweep = () => {
    clearTimeout(sweepTimer);
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const [socket, c] of connections) {
      if (c.busy > 0) continue;
      if (now - c.quietSince >= quietMs) socket.destroy();
      else next = Math.min(next, c.quietSince + quietMs);
    }
    if (next !== Number.POSITIVE_INFINITY) sweepTimer = setTimeout(sweep, next - now);
  };

  const track = (req: http.IncomingMessage, res: http.ServerResponse) => {
    inFlight.add(res);
    if (draining) res.shouldKeepAlive = false;
    const connection = connections.get(req.socket);
    if (connection) connection.busy++;
    res.once("close", () => {
      inFlight.delete(res);
      if (connection) {
        connection.busy--;
        connection.quietSince = Date.now();
      }
      if (closing) sweep();
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
  const front: net.Server | ProtocolSplitServer = http2
    ? createProtocolSplitServer({
        ...(keyPair && { tls: keyPair }),
        http1: (socket) => server.emit("connection", socket),
        http2: (socket) => http2.serve(socket),
        firstBytesTimeoutMs: limits.headerTimeoutMs,
      })
    : server;
  limitHttpServer(server, front, limits, limitReporter(options.front, options.log, options.metrics));
  // The socket requests come on: an HTTPS server's are the TLS sockets, after their handshake.
  server.on(server instanceof https.Server ? "secureConnection" : "connection", (socket: Duplex) => {
    connections.set(socket, { busy: 0, quietSince: Date.now() });
    socket.once("close", () => connections.delete(socket));
  });
  guardServer(server, {
    ...options,
    request: (req, res) => {
      track(req, res);
      return options.handler(req, res);
    },
    ...(onUpgrade && {
      upgrade: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
        if (closing) throw new HttpError(503, "shutting down");
        connections.delete(socket); // no longer HTTP: the upgraded connection's own rules apply
        upgraded.add(socket);
        socket.once("close", () => upgraded.delete(socket));
        return onUpgrade(req, socket, head);
      },
    }),
  });

  const { url, port } = await listenAt(front, options.address, tls ? "https" : "http");
  // Node's HTTP server starts tracking its connections (idle ones, header timeouts) on "listening".
  if (front !== server) server.emit("listening");

  const cutSilent = () => {
    if ("cutUndecided" in front) front.cutUndecided();
  };
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
      // Stops accepting, and only that. A connection with nothing in flight is not closed at
      // once, as node:http's close() and closeIdleConnections() would: behind a TCP load
      // balancer, one accepted just before has its client's first request on the way, and a
      // kept-alive one that has just had its answer may have the next; closed under it, that
      // request fails ("other side closed") with nothing to say it was never served. Each is
      // closed once quiet for `quietMs`, and a request that comes first is answered with
      // `Connection: close`, after which node:http ends the connection itself. A connection quiet
      // through the whole drain delay (every answer then said `Connection: close`) is closed at
      // once: its client has not used it for that long. (HTTP/1.1 cannot tell a client to stop
      // using an idle connection: a client picking exactly that one in that instant can still
      // lose its request; after a drain delay of quiet, that is as rare as it gets.)
      const stopped = new Promise<void>((resolve) => net.Server.prototype.close.call(front, () => resolve()));
      const http2Closed = http2?.close(graceMs);
      sweep();
      // Connections whose first bytes have not come: as long as a quiet one.
      const cutUndecided = setTimeout(() => cutSilent(), quietMs);
      // Every connection (in flight, upgraded, quiet, silent) is the front's: once they have all
      // closed, the front has.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stopped, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
      clearTimeout(sweepTimer);
      clearTimeout(cutUndecided);
      server.close(); // stops its connection checks; cuts what is left (below)
      server.closeAllConnections();
      for (const socket of upgraded) socket.destroy();
      cutSilent();
      await http2Closed;
      await stopped;
    },
  };
}
