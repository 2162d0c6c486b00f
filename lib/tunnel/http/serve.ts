import { createServer, type RequestListener, Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { DEFAULT_GRACE_MS } from "../session/grace.ts";
import { asSocket, type SocketLike, type StreamPeer } from "./socket-shim.ts";

export interface HttpStreamServer {
  /** The node:http server the streams are fed into; add 'upgrade' / 'connect' listeners here. */
  readonly server: Server;
  /**
   * Serves HTTP/1.1 on one accepted stream; `peer` becomes `req.socket.remoteAddress` & co. Once
   * `until` aborts (e.g. its tunnel is draining), every response on the connection says
   * `Connection: close` (the one under way too, if its headers are not out yet), so a client that
   * keeps connections alive opens its next one elsewhere instead of riding the old tunnel to its
   * end; an idle connection is left to the client (closing it could race its next request).
   */
  handle(stream: Duplex, peer?: StreamPeer, until?: AbortSignal): void;
  /**
   * Stops taking streams, closes idle connections, lets in-flight requests finish (their
   * responses say `Connection: close` when headers are not out yet) and resolves once every
   * HTTP stream has closed. Streams still open after `graceMs` (default `DEFAULT_GRACE_MS`) are reset.
   * Streams already handed to an 'upgrade' or 'connect' listener belong to it and are left alone.
   */
  close(graceMs?: number): Promise<void>;
}

/** What node:http leaves on a connection it serves; read only to drain gracefully. */
interface ServedSocket extends Duplex, SocketLike {
  /** The response being written (node:http assignSocket / detachSocket). */
  _httpMessage?: ServerResponse | null;
  /** node:http's parser; null once the connection was upgraded and handed over. */
  parser?: unknown;
}

/** Feeds accepted tunnel streams into a node:http server, as if they were TCP connections. */
export function serveHttp(handlerOrServer: RequestListener | Server): HttpStreamServer {
  const server = handlerOrServer instanceof Server ? handlerOrServer : createServer(handlerOrServer);
  const streams = new Set<ServedSocket>();
  /** Connections whose `until` aborted: every response on them says `Connection: close`. */
  const leaving = new WeakSet<Duplex>();
  server.prependListener("request", (req, res) => {
    if (leaving.has(req.socket)) res.shouldKeepAlive = false;
  });
  let closing = false;
  let drained: (() => void) | undefined;

  const forget = (socket: ServedSocket) => {
    streams.delete(socket);
    if (streams.size === 0) drained?.();
  };

  const closeWhenIdle = (socket: ServedSocket) => {
    const res = socket._httpMessage;
    if (!res) {
      socket.end();
      return;
    }
    if (!res.headersSent) res.shouldKeepAlive = false;
    // node:http's own 'finish' listener runs first and moves the next pipelined response in.
    res.once("finish", () => {
      if (!socket.destroyed) closeWhenIdle(socket);
    });
  };

  return {
    server,
    handle(stream, peer, until) {
      if (closing) {
        stream.destroy();
        return;
      }
      const socket = asSocket(stream, peer) as ServedSocket;
      if (socket.closed) return;
      streams.add(socket);
      socket.once("close", () => forget(socket));
      server.emit("connection", socket);
      if (until) {
        const leave = () => {
          // Not closed while idle: the client may be sending its next request at that moment,
          // and would see the connection close under it. That request is answered, with
          // `Connection: close`, and so is the one under way if its headers are not out yet.
          leaving.add(socket);
          const res = socket._httpMessage;
          if (res && !res.headersSent) res.shouldKeepAlive = false;
        };
        if (until.aborted) leave();
        else {
          until.addEventListener("abort", leave, { once: true });
          socket.once("close", () => until.removeEventListener("abort", leave));
        }
      }
    },
    close(graceMs = DEFAULT_GRACE_MS) {
      closing = true;
      for (const socket of streams) {
        if (socket.parser === null) forget(socket);
        else closeWhenIdle(socket);
      }
      if (streams.size === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          for (const socket of streams) socket.destroy();
        }, graceMs);
        timer.unref();
        drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    },
  };
}
