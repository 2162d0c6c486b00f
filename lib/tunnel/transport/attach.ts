import type { IncomingMessage, ServerResponse } from "node:http";
import * as http2 from "node:http2";
import type { Duplex } from "node:stream";
import { pathnameOf } from "./handshake-request.ts";
import type { Refusal } from "./handshake-validate.ts";
import { writeH1Refusal } from "./server-reply.ts";

/** Anything that emits Node's HTTP server events: http, https, http2 (cleartext or TLS with allowHTTP1). */
export type AttachableServer = NodeJS.EventEmitter;

export interface AttachOptions {
  /**
   * The server serves nothing but this endpoint: other paths get 404, plain requests to the path
   * get 426. Otherwise requests that are not tunnel handshakes are left to the server's other
   * listeners (and answered 404/405 only if there are none).
   */
  exclusive?: boolean;
}

/** What of the acceptor the server wiring needs. */
export interface Endpoint {
  readonly path: string;
  readonly subprotocol: string;
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  handleStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean;
}

type Listener = Parameters<NodeJS.EventEmitter["on"]>[1];

/** An RFC 8441 extended CONNECT (any :protocol) to `path`: the acceptor's to answer. */
export function isTunnelConnect(headers: http2.IncomingHttpHeaders, path: string): boolean {
  return (
    headers[":method"] === "CONNECT" &&
    headers[":protocol"] !== undefined &&
    pathnameOf(String(headers[":path"] ?? "")) === path
  );
}

/** Adds the endpoint's listeners to `server`; returns the function that removes them. */
export function attachEndpoint(
  endpoint: Endpoint,
  server: AttachableServer,
  options: AttachOptions,
): () => void {
  const exclusive = options.exclusive === true;
  const isH2 = typeof (server as Partial<http2.Http2Server>).updateSettings === "function";
  if (isH2) (server as http2.Http2Server).updateSettings({ enableConnectProtocol: true });
  const notFound = (url: string | undefined): Refusal => ({
    status: 404,
    message: `no tunnel endpoint at ${pathnameOf(url ?? "")}; it is at ${endpoint.path}`,
  });

  const listeners: Array<[string, Listener]> = [
    [
      "upgrade",
      (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        if (endpoint.handleUpgrade(req, socket, head)) return;
        if (exclusive || server.listenerCount("upgrade") === 1) writeH1Refusal(socket, notFound(req.url));
      },
    ],
    [
      "stream",
      (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
        endpoint.handleStream(stream, headers);
      },
    ],
  ];

  if (isH2) {
    // Once a 'request' listener exists, Node's HTTP/2 compatibility layer sees our CONNECT streams
    // too and answers them 405 unless a 'connect' listener takes them: this one lets ours through.
    listeners.push([
      "connect",
      (req: IncomingMessage | http2.Http2ServerRequest, res: http2.Http2ServerResponse | Duplex) => {
        const alone = server.listenerCount("connect") === 1;
        if (!(res instanceof http2.Http2ServerResponse)) {
          if (alone) res.destroy(); // Node's default for an unhandled HTTP/1.1 CONNECT
          return;
        }
        const headers = req.headers as http2.IncomingHttpHeaders;
        if (isTunnelConnect(headers, endpoint.path) || (!exclusive && !alone)) return;
        const refusal =
          headers[":protocol"] !== undefined
            ? notFound(req.url)
            : { status: 405, message: "CONNECT is not supported here" };
        res.writeHead(refusal.status, { "content-type": "text/plain; charset=utf-8" });
        res.end(`${refusal.message}\n`);
      },
    ]);
  }

  if (exclusive) {
    listeners.push([
      "request",
      (req: IncomingMessage | http2.Http2ServerRequest, res: ServerResponse | http2.Http2ServerResponse) => {
        const ours = pathnameOf(req.url ?? "") === endpoint.path;
        const refusal: Refusal = ours
          ? {
              status: 426,
              message: `this endpoint only accepts WebSocket connections with subprotocol "${endpoint.subprotocol}"`,
            }
          : notFound(req.url);
        const headers: Record<string, string> = { "content-type": "text/plain; charset=utf-8" };
        if (ours && req.httpVersionMajor === 1)
          Object.assign(headers, { upgrade: "websocket", connection: "Upgrade" });
        res.writeHead(refusal.status, headers);
        res.end(`${refusal.message}\n`);
      },
    ]);
  }

  for (const [event, listener] of listeners) server.on(event, listener);
  return () => {
    for (const [event, listener] of listeners) server.removeListener(event, listener);
  };
}
