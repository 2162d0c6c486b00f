import * as http2 from "node:http2";
import * as net from "node:net";
import * as tls from "node:tls";
import { TransportConnection } from "./connection.ts";
import { H2_WINDOW_SIZE, MAX_ERROR_BODY_BYTES } from "./constants.ts";
import type { DialConfig } from "./dial-config.ts";
import { HandshakeError, TransportError } from "./errors.ts";
import { connectThroughProxy } from "./proxy.ts";
import { readBody, waitForEvent } from "./wait.ts";
import { openWebSocketOnStream } from "./ws-over-stream.ts";

/** Headers an HTTP/2 request must not carry (RFC 9113 section 8.2.2) or that the dialer sets itself. */
const RESERVED = new Set([
  "connection",
  "upgrade",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "host",
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-protocol",
  "sec-websocket-extensions",
]);

/**
 * WebSocket over an RFC 8441 extended CONNECT stream, on an HTTP/2 session of its own:
 * TLS with ALPN h2 for wss://, prior-knowledge h2c for ws://. The session closes with the WebSocket.
 */
export async function dialH2(
  target: URL,
  cfg: DialConfig,
  signal: AbortSignal,
): Promise<TransportConnection> {
  const url = target.href;
  const secure = target.protocol === "wss:";
  const host = target.hostname.replace(/^\[|\]$/g, "");
  const port = Number(target.port) || (secure ? 443 : 80);
  const tlsOptions: tls.ConnectionOptions | undefined = secure
    ? { servername: net.isIP(host) ? undefined : host, ...cfg.tls, ALPNProtocols: ["h2"] }
    : undefined;

  const socket = cfg.proxy
    ? await connectThroughProxy(cfg.proxy, { host, port, tls: tlsOptions }, signal, url)
    : secure
      ? tls.connect({ host, port, ...tlsOptions })
      : net.connect({ host, port });
  let session: http2.ClientHttp2Session | undefined;
  try {
    await connected(socket, signal);
    if (socket instanceof tls.TLSSocket && socket.alpnProtocol !== "h2") {
      const alpn = socket.alpnProtocol || "none";
      throw new TransportError(
        "PROTOCOL",
        `${url} did not negotiate HTTP/2 (ALPN: ${alpn}); dial it without the http2 option`,
      );
    }
    session = http2.connect(`${secure ? "https" : "http"}://${target.host}`, {
      createConnection: () => socket,
      settings: { enablePush: false, initialWindowSize: H2_WINDOW_SIZE },
    });
    session.on("error", () => {}); // surfaces through the stream / waits below
    session.setLocalWindowSize(H2_WINDOW_SIZE);
    const closedEarly = { close: () => new TransportError("NETWORK", `${url} closed the HTTP/2 connection`) };
    await waitForEvent(session, "remoteSettings", signal, closedEarly);
    if (!session.remoteSettings.enableConnectProtocol) {
      throw new TransportError(
        "PROTOCOL",
        `${url} does not accept WebSocket over HTTP/2 (no SETTINGS_ENABLE_CONNECT_PROTOCOL, RFC 8441)`,
      );
    }

    const headers: http2.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(cfg.headers)) {
      if (!RESERVED.has(name.toLowerCase())) headers[name.toLowerCase()] = value;
    }
    const stream = session.request(
      {
        ...headers,
        ":method": "CONNECT",
        ":protocol": "websocket",
        ":scheme": secure ? "https" : "http",
        ":authority": target.host,
        ":path": target.pathname + target.search,
        "sec-websocket-version": "13",
        "sec-websocket-protocol": cfg.subprotocol,
      },
      { endStream: false },
    );
    const reset = { close: () => new TransportError("NETWORK", `${url} closed the CONNECT stream`) };
    const [response] = await waitForEvent<[http2.IncomingHttpHeaders]>(
      stream,
      "response",
      signal,
      reset,
    ).catch((err: unknown) => {
      // A stream-level reset is the server refusing this request (e.g. ENHANCE_YOUR_CALM for headers over its limit).
      if ((err as { code?: string }).code !== "ERR_HTTP2_STREAM_ERROR") throw err;
      const message = `${url} refused the WebSocket CONNECT stream: ${(err as Error).message}`;
      throw new TransportError("PROTOCOL", message, { cause: err });
    });
    const status = Number(response[":status"]);
    if (status < 200 || status > 299) {
      const body = await readBody(stream, MAX_ERROR_BODY_BYTES);
      throw new HandshakeError({ status, body, headers: response, url });
    }
    const selected = response["sec-websocket-protocol"];
    if (selected !== cfg.subprotocol) {
      throw new TransportError(
        "PROTOCOL",
        `${url} selected subprotocol ${JSON.stringify(selected ?? null)}, expected "${cfg.subprotocol}"`,
      );
    }
    const ws = openWebSocketOnStream(stream, {
      role: "client",
      protocol: selected,
      maxPayload: cfg.maxPayload,
    });
    const owned = session;
    return new TransportConnection({
      ws,
      httpVersion: "h2",
      remoteAddress: socket.remoteAddress,
      identity: undefined,
      onClosed: () => owned.close(),
    });
  } catch (err) {
    session?.destroy();
    socket.destroy();
    if (/NO_APPLICATION_PROTOCOL/.test(String((err as { code?: unknown }).code))) {
      const message = `${url} did not negotiate HTTP/2 (no common ALPN protocol); dial it without the http2 option`;
      throw new TransportError("PROTOCOL", message, { cause: err });
    }
    throw err;
  }
}

/** Waits for the TCP connect, or for the TLS handshake (which can only finish after some I/O). */
function connected(socket: net.Socket, signal: AbortSignal): Promise<unknown> {
  if (socket instanceof tls.TLSSocket) return waitForEvent(socket, "secureConnect", signal);
  if (!socket.connecting) return Promise.resolve();
  return waitForEvent(socket, "connect", signal);
}
