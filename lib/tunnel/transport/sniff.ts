import type { Server as HttpServer } from "node:http";
import type { Http2Server } from "node:http2";
import { createServer, type Server, type Socket } from "node:net";

/** The connection preface every HTTP/2 client sends first (RFC 9113 section 3.4). */
export const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export interface SniffingServerOptions {
  /** Receives connections that do not start with the HTTP/2 preface. */
  h1: HttpServer;
  /** Receives prior-knowledge HTTP/2 (h2c) connections. */
  h2: Http2Server;
  /** A connection that has not sent enough to be classified by then is dropped. */
  timeoutMs: number;
}

/**
 * HTTP/1.1 and cleartext HTTP/2 on one port: reads just enough of each connection to tell the
 * HTTP/2 preface from anything else, puts the bytes back and hands the socket to the right server.
 */
export function createSniffingServer(options: SniffingServerOptions): Server {
  return createServer({ noDelay: true }, (socket) => {
    sniff(socket, options.timeoutMs, (isH2) => {
      (isH2 ? options.h2 : options.h1).emit("connection", socket);
    });
  });
}

/** `true` for HTTP/2, `false` for anything else, `undefined` while `head` is a strict prefix of the preface. */
export function classify(head: Buffer): boolean | undefined {
  const n = Math.min(head.length, HTTP2_PREFACE.length);
  if (!head.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n))) return false;
  return n === HTTP2_PREFACE.length ? true : undefined;
}

function sniff(socket: Socket, timeoutMs: number, route: (isH2: boolean) => void): void {
  let head = Buffer.alloc(0);
  const onTimeout = () => socket.destroy();
  const onError = () => socket.destroy();
  const cleanup = () => {
    socket.removeListener("readable", onReadable);
    socket.removeListener("timeout", onTimeout);
    socket.removeListener("error", onError);
    socket.setTimeout(0);
  };
  const onReadable = () => {
    for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) {
      head = Buffer.concat([head, chunk]);
      const isH2 = classify(head);
      if (isH2 === undefined) continue;
      cleanup();
      socket.unshift(head);
      route(isH2);
      return;
    }
  };
  socket.setTimeout(timeoutMs);
  socket.on("timeout", onTimeout);
  socket.on("error", onError);
  socket.on("readable", onReadable);
}
