import { readFile } from "node:fs/promises";
import * as http from "node:http";
import * as https from "node:https";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { ListenAddress } from "../../common/config/values.ts";
import { listenAt } from "../../common/listen.ts";
import type { TlsFiles } from "../config/index.ts";

export type UpgradeListener = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface HttpListenOptions {
  address: ListenAddress;
  /** Serve HTTPS with these PEM files. */
  tls?: TlsFiles;
  handler: http.RequestListener;
  /** Requests with `Connection: Upgrade` (exec, attach, port-forward, WebSocket). */
  onUpgrade?: UpgradeListener;
}

export interface HttpListener {
  readonly url: string;
  readonly port: number;
  readonly server: http.Server;
  /**
   * Stops accepting, closes idle keep-alive connections, lets requests in flight (and upgraded
   * connections) finish for up to `graceMs`, then cuts what is left.
   */
  close(graceMs?: number): Promise<void>;
}

/** An HTTP/1.1 front (API, Kubernetes API proxy) that can drain gracefully. */
export async function listenHttp(options: HttpListenOptions): Promise<HttpListener> {
  const inFlight = new Set<http.ServerResponse>();
  const upgraded = new Set<Duplex>();
  let closing = false;
  let settled: (() => void) | undefined;
  const checkDrained = () => {
    if (closing && inFlight.size === 0 && upgraded.size === 0) settled?.();
  };

  const handler: http.RequestListener = (req, res) => {
    inFlight.add(res);
    if (closing) res.shouldKeepAlive = false;
    res.once("close", () => {
      inFlight.delete(res);
      if (closing) setImmediate(() => server.closeIdleConnections());
      checkDrained();
    });
    options.handler(req, res);
  };
  const tls = options.tls?.certificateFile && options.tls.keyFile ? options.tls : undefined;
  const server: http.Server = tls
    ? https.createServer(
        { cert: await readFile(tls.certificateFile!), key: await readFile(tls.keyFile!) },
        handler,
      )
    : http.createServer(handler);
  // Watches and `logs -f` are long: no whole-request deadline; headers must still come quickly.
  server.requestTimeout = 0;
  server.headersTimeout = 30_000;
  server.keepAliveTimeout = 30_000;
  if (options.onUpgrade) {
    const onUpgrade = options.onUpgrade;
    server.on("upgrade", (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
      if (closing) {
        socket.end("HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
        return;
      }
      upgraded.add(socket);
      socket.once("close", () => {
        upgraded.delete(socket);
        checkDrained();
      });
      onUpgrade(req, socket, head);
    });
  }
  server.on("clientError", (_err, socket: Duplex) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    else socket.destroy();
  });

  const { url, port } = await listenAt(server, options.address, tls ? "https" : "http");

  return {
    url,
    port,
    server,
    async close(graceMs = 30_000) {
      if (closing) return;
      closing = true;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
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
      await stopped;
    },
  };
}
