import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { IncomingHttpHeaders as Http2Headers, ServerHttp2Stream } from "node:http2";
import { TLSSocket } from "node:tls";

/** What an `authenticate` hook sees, the same for HTTP/1.1 Upgrade and HTTP/2 extended CONNECT. */
export interface HandshakeRequest {
  readonly httpVersion: "h1" | "h2";
  /** `GET` for HTTP/1.1, `CONNECT` for HTTP/2. */
  readonly method: string;
  /** Request target as sent: path and query. */
  readonly path: string;
  readonly pathname: string;
  readonly query: URLSearchParams;
  /** Lowercase names; HTTP/2 pseudo-headers removed, `:authority` given as `host`. */
  readonly headers: IncomingHttpHeaders;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  /** True when the connection is TLS. */
  readonly secure: boolean;
}

export function requestFromH1(req: IncomingMessage): HandshakeRequest {
  const socket = req.socket;
  return build({
    httpVersion: "h1",
    method: req.method ?? "",
    path: req.url ?? "",
    headers: req.headers,
    remoteAddress: socket.remoteAddress,
    remotePort: socket.remotePort,
    secure: socket instanceof TLSSocket,
  });
}

export function requestFromH2(stream: ServerHttp2Stream, headers: Http2Headers): HandshakeRequest {
  const plain: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith(":")) plain[name] = value;
  }
  const authority = headers[":authority"];
  if (authority !== undefined && plain.host === undefined) plain.host = authority;
  const socket = stream.session?.socket;
  return build({
    httpVersion: "h2",
    method: String(headers[":method"] ?? ""),
    path: String(headers[":path"] ?? ""),
    headers: plain,
    remoteAddress: socket?.remoteAddress,
    remotePort: socket?.remotePort,
    secure: stream.session?.encrypted === true,
  });
}

export function pathnameOf(path: string): string {
  const q = path.indexOf("?");
  return q === -1 ? path : path.slice(0, q);
}

function build(init: Omit<HandshakeRequest, "pathname" | "query">): HandshakeRequest {
  const q = init.path.indexOf("?");
  return {
    ...init,
    pathname: pathnameOf(init.path),
    query: new URLSearchParams(q === -1 ? "" : init.path.slice(q + 1)),
  };
}
