// A reverse proxy from requests that arrived over the tunnel to one upstream HTTP(S) origin:
// bodies stream both ways (watch, logs -f), and an Upgrade (exec, attach, port-forward) becomes
// a raw byte splice once the upstream has said 101.
import * as http from "node:http";
import * as https from "node:https";
import type { Duplex } from "node:stream";

export interface Upstream {
  /** Base URL; request paths are appended to its path (e.g. an API server behind a path prefix). */
  url: URL;
  /**
   * Per request: the agent to send it with (the connection pool, holding the TLS settings) and
   * the headers, from the (already hop-by-hop-free) incoming ones. On every request's path, so
   * whatever it reads (credentials, certificates) it caches.
   */
  prepare(incoming: http.OutgoingHttpHeaders): UpstreamRequest | Promise<UpstreamRequest>;
  /** Closes the pooled upstream connections. */
  close(): void;
}

export interface UpstreamRequest {
  agent: http.Agent;
  headers: http.OutgoingHttpHeaders;
}

export interface ForwarderOptions {
  /** Body of an error the proxy itself answers with (upstream unreachable, bad credentials). */
  errorBody(status: number, message: string): { contentType: string; body: string };
  /** Called as each request starts; what it returns is called with the final status ("aborted" when the client went away first). */
  track?(): (status: number | "aborted") => void;
  log?: { warn(obj: object, msg: string): void };
}

export interface Forwarder {
  request: http.RequestListener;
  upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Closes the pooled upstream connections. */
  close(): void;
}

/** Per-connection headers (RFC 9110 §7.6.1) and the ones the proxy sets itself. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);

/** Largest error body of a refused upgrade relayed to the client. */
const MAX_REFUSAL_BODY = 64 * 1024;

export function createForwarder(upstream: Upstream, options: ForwarderOptions): Forwarder {
  const client = upstream.url.protocol === "https:" ? https : http;
  const base = upstream.url.pathname.replace(/\/+$/, "");

  async function outgoing(req: http.IncomingMessage, upgrade: boolean): Promise<http.RequestOptions> {
    const { agent, headers } = await upstream.prepare(endToEnd(req.headers));
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
    close: () => upstream.close(),
    request(req, res) {
      const done = options.track?.();
      let status: number | "aborted" = "aborted";
      res.once("close", () => done?.(res.writableFinished ? status : "aborted"));
      const fail = (code: number, message: string) => {
        status = code;
        if (res.headersSent) return void res.destroy();
        const { contentType, body } = options.errorBody(code, message);
        res
          .writeHead(code, { "content-type": contentType, "content-length": Buffer.byteLength(body) })
          .end(body);
      };
      outgoing(req, false).then(
        (opts) => {
          const up = client.request(opts);
          up.on("error", (err) => {
            options.log?.warn({ err, upstream: upstream.url.origin }, "upstream request failed");
            fail(502, `upstream ${upstream.url.host} failed: ${err.message}`);
          });
          up.on("response", (ur) => {
            status = ur.statusCode ?? 502;
            res.writeHead(status, ur.statusMessage, endToEnd(ur.headers));
            res.flushHeaders(); // a watch may say nothing for minutes: the client must see the head now
            ur.pipe(res);
            ur.on("error", () => res.destroy());
          });
          // The client went away (or the stream was reset) before the response finished.
          res.once("close", () => {
            if (!res.writableFinished) up.destroy();
          });
          req.pipe(up);
        },
        (err: Error) => fail(500, `cannot prepare the upstream request: ${err.message}`),
      );
    },

    upgrade(req, socket, head) {
      const track = options.track?.();
      let tracked = false;
      const done = (status: number) => {
        if (!tracked) track?.(status);
        tracked = true;
      };
      socket.on("error", () => socket.destroy());
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
          up.on("error", (err) => refuse(502, `upstream ${upstream.url.host} failed: ${err.message}`));
          up.on("upgrade", (ur, upSocket, upHead) => {
            done(101);
            const headers = { ...ur.headers };
            socket.write(responseHead(101, ur.statusMessage ?? "Switching Protocols", headers));
            if (upHead.length > 0) socket.write(upHead);
            if (head.length > 0) upSocket.write(head);
            upSocket.on("error", () => socket.destroy());
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
            ur.once("end", () => {
              const body = Buffer.concat(chunks);
              const headers = {
                ...endToEnd(ur.headers),
                "content-length": String(body.length),
                connection: "close",
              };
              done(ur.statusCode ?? 502);
              socket.end(
                Buffer.concat([
                  Buffer.from(responseHead(ur.statusCode ?? 502, ur.statusMessage ?? "", headers)),
                  body,
                ]),
              );
            });
          });
          up.end();
        },
        (err: Error) => refuse(500, `cannot prepare the upstream request: ${err.message}`),
      );
    },
  };
}

/** `headers` without the hop-by-hop ones (and those named by Connection). */
export function endToEnd(
  headers: http.IncomingHttpHeaders | http.OutgoingHttpHeaders,
): http.OutgoingHttpHeaders {
  const named = String(headers.connection ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value !== undefined && !HOP_BY_HOP.has(lower) && !named.includes(lower)) out[lower] = value;
  }
  return out;
}

function responseHead(status: number, message: string, headers: http.OutgoingHttpHeaders): string {
  const lines = Object.entries(headers).flatMap(([name, value]) =>
    value === undefined ? [] : (Array.isArray(value) ? value : [value]).map((v) => `${name}: ${v}\r\n`),
  );
  return `HTTP/1.1 ${status} ${message}\r\n${lines.join("")}\r\n`;
}
