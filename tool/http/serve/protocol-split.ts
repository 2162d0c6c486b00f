// One port for HTTP/1.1 and HTTP/2 (gRPC): Node's http server and grpc-js cannot share a listening
// socket, so a front server takes each connection and hands it to one or the other, whole.
import * as net from "node:net";
import type { Duplex } from "node:stream";
import * as tls from "node:tls";

/** What every HTTP/2 connection starts with (RFC 9113 §3.4): how cleartext HTTP/2 is told apart. */
export const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** Whether `head` (the first bytes of a connection) is the HTTP/2 preface, or cannot be one. */
export function prefaceVerdict(head: Buffer): "http2" | "other" | "undecided" {
  const n = Math.min(head.length, HTTP2_PREFACE.length);
  if (!head.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n))) return "other";
  return n === HTTP2_PREFACE.length ? "http2" : "undecided";
}

export interface ProtocolSplitOptions {
  /** TLS: ALPN offers `h2` and `http/1.1`; the client's choice decides. */
  tls?: { cert: Buffer; key: Buffer };
  /** Connections speaking HTTP/1.x (the http server's `emit("connection", socket)`). */
  http1: (socket: net.Socket) => void;
  /** Connections speaking HTTP/2, their first bytes still unread. */
  http2: (socket: Duplex) => void;
  /** How long a cleartext client may take to send its first bytes. Default 10 s. */
  firstBytesTimeoutMs?: number;
}

/** The front server: a `net.Server` that can also cut the connections that have sent nothing yet. */
export interface ProtocolSplitServer extends net.Server {
  /**
   * Cuts the connections whose first bytes have not come yet. `close()` does not: it only stops
   * accepting, since a connection accepted just before has its client's request on the way (a
   * TCP load balancer connects to the server before it passes on what its client sends).
   */
  cutUndecided(): void;
}

/**
 * A server (not yet listening) that hands each connection to `http1` or `http2`: over TLS by ALPN
 * (no ALPN: HTTP/1.1), in cleartext by whether it starts with the HTTP/2 preface (h2c with prior
 * knowledge, as gRPC clients speak it). At most the preface's 24 bytes are read to decide.
 */
export function createProtocolSplitServer(options: ProtocolSplitOptions): ProtocolSplitServer {
  const timeoutMs = options.firstBytesTimeoutMs ?? 10_000;
  if (options.tls) {
    const server = tls.createServer({
      ...options.tls,
      ALPNProtocols: ["h2", "http/1.1"],
      handshakeTimeout: timeoutMs,
    });
    server.on("secureConnection", (socket) => {
      if (socket.alpnProtocol === "h2") options.http2(socket);
      else options.http1(socket);
    });
    // A failed handshake is the client's problem: close its socket, nothing more.
    server.on("tlsClientError", (_err, socket) => socket.destroy());
    // Handshakes in progress end by their own deadline: nothing for cutUndecided.
    return withCutUndecided(server, new Set());
  }
  /** Connections whose first bytes have not come yet: nobody else will close them. */
  const undecided = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    let head = Buffer.alloc(0);
    undecided.add(socket);
    socket.once("close", () => undecided.delete(socket));
    const decide = (verdict: "http2" | "other") => {
      undecided.delete(socket);
      socket.off("data", onData);
      socket.setTimeout(0);
      socket.off("timeout", onTimeout);
      // Paused, the bytes read go back in front of the rest for whoever takes the socket. Node's
      // HTTP/2 session reads them itself; the HTTP/1 parser gets them once the socket flows again.
      socket.pause();
      socket.unshift(head);
      if (verdict === "http2") options.http2(socket);
      else {
        options.http1(socket);
        socket.resume();
      }
    };
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const verdict = prefaceVerdict(head);
      if (verdict !== "undecided") decide(verdict);
    };
    const onTimeout = () => socket.destroy();
    socket.on("error", () => {}); // a reset before the decision: nothing to tell anyone
    socket.setTimeout(timeoutMs, onTimeout);
    socket.on("data", onData);
  });
  return withCutUndecided(server, undecided);
}

function withCutUndecided(server: net.Server, undecided: Set<net.Socket>): ProtocolSplitServer {
  return Object.assign(server, {
    cutUndecided() {
      for (const socket of undecided) socket.destroy();
    },
  });
}
