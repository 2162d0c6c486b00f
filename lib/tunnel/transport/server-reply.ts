import { type IncomingMessage, STATUS_CODES } from "node:http";
import type { ServerHttp2Stream } from "node:http2";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import type { HttpVersion } from "./connection.ts";
import type { Refusal } from "./handshake-validate.ts";
import { openWebSocketOnStream } from "./ws-over-stream.ts";

/** The two ways of answering a pending handshake, for HTTP/1.1 and HTTP/2 alike. */
export interface HandshakeReply {
  readonly httpVersion: HttpVersion;
  readonly remoteAddress: string | undefined;
  /** True once the client has gone away (nobody left to answer). */
  gone(): boolean;
  /** Calls `listener` when the client goes away; returns the unsubscribe function. */
  onGone(listener: () => void): () => void;
  refuse(refusal: Refusal): void;
  /** Completes the handshake and opens the WebSocket; undefined if the client left meanwhile. */
  accept(protocol: string, maxPayload: number): WebSocket | undefined;
}

const noop = () => {};

/**
 * ws' own server, without a listener of its own (`noServer`): it completes HTTP/1.1 upgrades we
 * hand it once our authentication has passed. One per maximum payload (per acceptor, in practice).
 */
const upgraders = new Map<string, WebSocketServer>();
function upgraderFor(protocol: string, maxPayload: number): WebSocketServer {
  const key = `${protocol}\u0000${maxPayload}`;
  let wss = upgraders.get(key);
  if (!wss) {
    wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      perMessageDeflate: false,
      maxPayload,
      // validateH1 already required this subprotocol among the client's.
      handleProtocols: () => protocol,
    });
    upgraders.set(key, wss);
  }
  return wss;
}

/** Calls `listener` when `emitter` closes; returns a function that stops listening. */
function onClose(emitter: Duplex | ServerHttp2Stream, listener: () => void): () => void {
  emitter.once("close", listener);
  return () => emitter.removeListener("close", listener);
}

export function h1Reply(req: IncomingMessage, socket: Duplex, head: Buffer): HandshakeReply {
  // Node's HTTP server drops its socket listeners before 'upgrade'; a reset while we authenticate
  // must not become an uncaught error.
  socket.on("error", noop);
  const gone = () => socket.destroyed || !socket.readable || !socket.writable;
  return {
    httpVersion: "h1",
    remoteAddress: req.socket.remoteAddress,
    gone,
    onGone: (listener) => onClose(socket, listener),
    refuse: (refusal) => writeH1Refusal(socket, refusal),
    accept(protocol, maxPayload) {
      if (gone()) {
        socket.destroy();
        return undefined;
      }
      socket.removeListener("error", noop);
      // ws' public upgrade: it answers 101 and opens the WebSocket before returning (no verifyClient).
      let opened: WebSocket | undefined;
      upgraderFor(protocol, maxPayload).handleUpgrade(req, socket, head, (ws) => {
        opened = ws;
      });
      return opened;
    },
  };
}

/** Answers an HTTP/1.1 request on a raw socket and closes it. */
export function writeH1Refusal(socket: Duplex, { status, message, headers = {} }: Refusal): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const body = Buffer.from(`${message}\n`);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}`,
    "Connection: close",
    "Content-Type: text/plain; charset=utf-8",
    `Content-Length: ${body.length}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.once("finish", () => socket.destroy());
  socket.end(Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`), body]));
}

/** Connection-specific headers are illegal in HTTP/2 responses (RFC 9113 section 8.2.2). */
const H1_ONLY = new Set(["connection", "upgrade", "keep-alive", "transfer-encoding"]);

export function h2Reply(stream: ServerHttp2Stream): HandshakeReply {
  stream.on("error", noop); // a reset while pending; after accept, ws listens too
  const gone = () => stream.destroyed || stream.closed;
  return {
    httpVersion: "h2",
    remoteAddress: stream.session?.socket?.remoteAddress,
    gone,
    onGone: (listener) => onClose(stream, listener),
    refuse: (refusal) => writeH2Refusal(stream, refusal),
    accept(protocol, maxPayload) {
      if (gone()) return undefined;
      stream.respond({ ":status": 200, "sec-websocket-protocol": protocol });
      return openWebSocketOnStream(stream, { role: "server", protocol, maxPayload });
    },
  };
}

export function writeH2Refusal(stream: ServerHttp2Stream, { status, message, headers = {} }: Refusal): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return;
  const extra: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!H1_ONLY.has(name.toLowerCase())) extra[name.toLowerCase()] = value;
  }
  stream.respond({ ":status": status, "content-type": "text/plain; charset=utf-8", ...extra });
  stream.end(`${message}\n`);
}
