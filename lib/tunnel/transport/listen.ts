import { once } from "node:events";
import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo, Server, Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { TunnelAcceptor } from "./acceptor.ts";
import { DEFAULT_HANDSHAKE_TIMEOUT_MS, H2_WINDOW_SIZE } from "./constants.ts";
import type { AcceptorOptions } from "./options.ts";
import { positive } from "./options.ts";
import { createSniffingServer } from "./sniff.ts";

export interface ListenOptions<I> extends AcceptorOptions<I> {
  /** Default: all interfaces, as `net.Server#listen`. */
  host?: string;
  /** Default 0: an ephemeral port (see `address`). */
  port?: number;
  /**
   * Serve TLS: HTTP/1.1 and HTTP/2 told apart by ALPN. Without it, cleartext HTTP/1.1 and
   * prior-knowledge HTTP/2 (h2c) are told apart by sniffing the first bytes.
   */
  tls?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer | Array<string | Buffer> };
  /** Largest request header block, HTTP/1.1 and HTTP/2. Default 16 KiB (Node's). */
  maxHeaderSize?: number;
  /** Connections open at once; past it, new ones are closed as they arrive. Default 10000. */
  maxConnections?: number;
  /** HTTP/2: streams open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS). Default 100. */
  maxStreamsPerConnection?: number;
  /** Told each time a connection is closed for a limit ("max connections", "no tunnel"). */
  onLimit?: (limit: string) => void;
}

export interface TunnelListener<I> {
  readonly acceptor: TunnelAcceptor<I>;
  /** The listening server: `net.Server` (cleartext) or `Http2SecureServer` (TLS). */
  readonly server: Server;
  readonly address: AddressInfo;
  /** `ws://` or `wss://` URL of the endpoint, built from the bound address. */
  readonly url: string;
  /** Stops listening, closes tunnels (see {@link TunnelAcceptor.close}), then drops every socket left. */
  close(timeoutMs?: number): Promise<void>;
}

/** A server that serves only the tunnel endpoint, HTTP/1.1 and HTTP/2, on one port. */
export async function listen<I = undefined>(options: ListenOptions<I>): Promise<TunnelListener<I>> {
  const acceptor = new TunnelAcceptor<I>(options);
  const handshakeTimeoutMs = positive(
    "handshakeTimeoutMs",
    options.handshakeTimeoutMs,
    DEFAULT_HANDSHAKE_TIMEOUT_MS,
  );
  const maxHeaderSize = positive("maxHeaderSize", options.maxHeaderSize, 16 * 1024);
  const h2Settings: http2.Settings = {
    enableConnectProtocol: true,
    maxHeaderListSize: maxHeaderSize,
    initialWindowSize: H2_WINDOW_SIZE,
    maxConcurrentStreams: positive("maxStreamsPerConnection", options.maxStreamsPerConnection, 100),
  };
  const { onLimit } = options;

  let server: Server;
  if (options.tls) {
    const secure = http2.createSecureServer({
      ...options.tls,
      allowHTTP1: true,
      settings: h2Settings,
      handshakeTimeout: handshakeTimeoutMs,
    });
    // The HTTP/1.1 side of an Http2SecureServer reads this like an http.Server would.
    Object.assign(secure, { maxHeaderSize });
    secure.on("secureConnection", (socket: TLSSocket) => {
      if (socket.alpnProtocol !== "h2") armRequestDeadline(socket, handshakeTimeoutMs);
    });
    disarmOnUpgrade(secure);
    acceptor.attach(secure, { exclusive: true });
    setUpSessions(secure, handshakeTimeoutMs, onLimit);
    server = secure;
  } else {
    const h1 = http.createServer({ maxHeaderSize, keepAliveTimeout: handshakeTimeoutMs });
    h1.on("connection", (socket: Socket) => armRequestDeadline(socket, handshakeTimeoutMs));
    disarmOnUpgrade(h1);
    const h2 = http2.createServer({ settings: h2Settings });
    acceptor.attach(h1, { exclusive: true });
    acceptor.attach(h2, { exclusive: true });
    setUpSessions(h2, handshakeTimeoutMs, onLimit);
    server = createSniffingServer({ h1, h2, timeoutMs: handshakeTimeoutMs });
  }

  server.maxConnections = positive("maxConnections", options.maxConnections, 10_000);
  server.on("drop", () => onLimit?.("max connections"));

  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  server.listen(options.port ?? 0, options.host);
  await once(server, "listening");
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `${options.tls ? "wss" : "ws"}://${host}:${address.port}${acceptor.path}`;

  return {
    acceptor,
    server,
    address,
    url,
    async close(timeoutMs = 5000) {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      await acceptor.close(undefined, undefined, timeoutMs);
      for (const socket of sockets) socket.destroy();
      await stopped;
    },
  };
}

const kDeadline = Symbol("requestDeadline");
type Armed = Socket & { [kDeadline]?: NodeJS.Timeout };

/**
 * An HTTP/1.1 connection must deliver a complete Upgrade request within the handshake timeout;
 * from there the acceptor's own deadline applies. (Node's headersTimeout cannot be used: its
 * checker only runs on servers that listen themselves, which the sniffed and TLS ones do not.)
 */
function armRequestDeadline(socket: Armed, timeoutMs: number): void {
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  socket[kDeadline] = timer;
  socket.on("close", () => clearTimeout(timer));
}

function disarmOnUpgrade(server: NodeJS.EventEmitter): void {
  server.prependListener("upgrade", (req: http.IncomingMessage) =>
    clearTimeout((req.socket as Armed)[kDeadline]),
  );
}

/**
 * Sizes each HTTP/2 connection's receive window like its streams' and closes a connection that
 * carries no tunnel: checked every handshake timeout, one without an open tunnel is closed unless
 * a handshake is still in progress on it, and even then once it has gone twice the handshake
 * timeout without one. So neither an idle connection, nor one whose handshakes were refused (or
 * whose requests were for something else), nor one whose tunnel has ended, is held open.
 */
function setUpSessions(
  server: http2.Http2Server | http2.Http2SecureServer,
  timeoutMs: number,
  onLimit: ((limit: string) => void) | undefined,
): void {
  server.on("session", (session: http2.ServerHttp2Session) => {
    session.setLocalWindowSize(H2_WINDOW_SIZE);
    const streams = new Set<http2.ServerHttp2Stream>();
    session.on("stream", (stream: http2.ServerHttp2Stream) => {
      streams.add(stream);
      stream.once("close", () => streams.delete(stream));
    });
    /** When the connection last carried a tunnel (or opened). */
    let since = Date.now();
    const check = () => {
      let pending = false;
      for (const stream of streams) {
        // A tunnel is a stream answered 200 (the accepted handshake); refusals are 4xx/5xx.
        if (stream.sentHeaders?.[":status"] === 200) {
          since = Date.now();
          timer.refresh();
          return;
        }
        if (!stream.headersSent) pending = true;
      }
      if (pending && Date.now() - since < 2 * timeoutMs) {
        timer.refresh();
        return;
      }
      onLimit?.("no tunnel");
      session.destroy();
    };
    const timer = setTimeout(check, timeoutMs);
    session.once("close", () => clearTimeout(timer));
  });
}
