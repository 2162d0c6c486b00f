// The limits every HTTP listener of the daemons applies to its connections, so that no peer,
// authenticated or not, holds file descriptors and memory without bound: headers and bodies must
// arrive in time, idle connections close, connections past a cap are refused, and an HTTP/2
// connection that never authenticates is closed (http2-deadlines.ts). What is sent back (watches,
// `logs -f`, gRPC feeds) has no deadline: every limit is on receiving, or on a connection with
// nothing in flight.
import type * as http from "node:http";
import type * as net from "node:net";
import type { Duplex } from "node:stream";
import type { LimitReport } from "./limit-report.ts";

export interface ConnectionLimits {
  /** A request's headers (the first request's counted from the connection's start) must be in by then. */
  headerTimeoutMs: number;
  /** After its headers, a request's body must be in by then (the response may take as long as it needs). */
  bodyTimeoutMs: number;
  /** A connection with no request in flight is closed after this long (HTTP/1.1 keep-alive, HTTP/2 without streams). */
  idleTimeoutMs: number;
  /** Connections open at once on the listener; past it, new ones are closed on arrival. */
  maxConnections: number;
  /** HTTP/2: streams (requests, gRPC calls) open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxStreamsPerConnection: number;
  /** HTTP/2: a connection that has made no authenticated request by then is closed. */
  unauthenticatedTimeoutMs: number;
}

/** Production defaults (GitLab's kas: 10 s for headers, 1 min idle, on its HTTP servers). */
export const DEFAULT_CONNECTION_LIMITS: Readonly<ConnectionLimits> = {
  headerTimeoutMs: 10_000,
  bodyTimeoutMs: 60_000,
  idleTimeoutMs: 60_000,
  maxConnections: 10_000,
  maxStreamsPerConnection: 100,
  unauthenticatedTimeoutMs: 30_000,
};

/**
 * node:http's settings for `limits`: `createServer(httpServerOptions(limits))`. Node checks its
 * header and request deadlines on a timer (30 s by default, which would stretch a 10 s deadline
 * to 40 s): here it runs at a quarter of the shorter deadline, at most every second.
 */
export function httpServerOptions(limits: ConnectionLimits): http.ServerOptions {
  const shorter = Math.min(limits.headerTimeoutMs, limits.bodyTimeoutMs);
  return {
    headersTimeout: limits.headerTimeoutMs,
    // node:http counts the whole request from its start: the headers' time plus the body's.
    requestTimeout: limits.headerTimeoutMs + limits.bodyTimeoutMs,
    keepAliveTimeout: limits.idleTimeoutMs,
    connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(shorter / 4))),
  };
}

/**
 * Applies the HTTP/1.1 limits to `server` (created with {@link httpServerOptions}) and caps the
 * connections of `front`, the server that accepts them (the server itself, or the protocol-split
 * server in front of it): connections past the cap are closed as they arrive.
 */
export function limitHttpServer(
  server: http.Server,
  front: net.Server,
  limits: ConnectionLimits,
  report?: LimitReport,
): void {
  front.maxConnections = limits.maxConnections;
  front.on("drop", () => report?.("max connections"));
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") report?.("header or body deadline");
    answerClientError(err, socket);
  });
}

const CLIENT_ERROR_ANSWERS: Readonly<Record<string, string>> = {
  HPE_HEADER_OVERFLOW: "431 Request Header Fields Too Large",
  HPE_CHUNK_EXTENSIONS_OVERFLOW: "413 Payload Too Large",
  ERR_HTTP_REQUEST_TIMEOUT: "408 Request Timeout",
};

/** What node:http answers a malformed or late request without a 'clientError' listener, which this one replaces. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const status = CLIENT_ERROR_ANSWERS[err.code ?? ""] ?? "400 Bad Request";
    socket.write(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
  }
  socket.destroy(err);
}
