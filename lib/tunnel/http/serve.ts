import { createServer, type RequestListener, Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { DEFAULT_GRACE_MS } from "../session/grace.ts";
import { asSocket, type SocketLike, type StreamPeer } from "./socket-shim.ts";

export interface HttpStreamServer {
  /** The node:http server the streams are fed into; add 'upgrade' / 'connect' listeners here. */
  readonly server: Server;
  /** Serves HTTP/1.1 on one accepted stream; `peer` becomes `req.socket.remoteAddress` & co. */
  handle(stream: Duplex, peer?: StreamPeer): void;
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
    handle(stream, peer) {
      if (closing) {
        stream.destroy();
        return;
      }
      const socket = asSocket(stream, peer) as ServedSocket;
      if (socket.closed) return;
      streams.add(socket);
      socket.once("close", () => forget(socket));
      server.emit("connection", socket);
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
