import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { createWebSocketStream, WebSocketServer } from "ws";
import { SpdySession, type SpdyStream } from "./spdy.ts";

/** The port-forward subprotocol (client-go `PortForwardProtocolV1Name`). */
const PROTOCOL = "portforward.k8s.io";
/** kubectl 1.31+ first offers SPDY tunnelled through a WebSocket under this subprotocol. */
const TUNNELED = `SPDY/3.1+${PROTOCOL}`;
/** Requests whose error or data stream has not arrived yet, per connection; more are refused. */
const MAX_HALF_OPEN = 64;

/** The pod a port-forward reached, and the container port asked for. */
export interface PortTarget {
  namespace: string;
  pod: string;
  port: number;
}

/**
 * Serves one forwarded connection as the pod's port would: read what the client sent, write the
 * answer, `end()` to close. Throwing refuses it: the message goes back on the error stream, as
 * the kubelet reports a port nothing listens on.
 */
export type PortHandler = (conn: Duplex, target: PortTarget) => void;

/** What a port answers when no test registered a handler: a greeting line, then an echo. */
export const echoPort: PortHandler = (conn, { namespace, pod, port }) => {
  conn.write(`port-forward ${namespace}/${pod}:${port}\n`);
  conn.pipe(conn);
};

/**
 * `pods/{name}/portforward` as the API server and kubelet serve it together: SPDY/3.1, tunnelled
 * through a WebSocket (kubectl's default) or after a plain `Upgrade: SPDY/3.1` (kubectl's
 * fallback, or with KUBECTL_PORT_FORWARD_WEBSOCKETS=false). Per forwarded connection the client
 * opens an error stream and a data stream with the same `requestid` header and the remote `port`;
 * the data stream is handed to the port's handler, and the error stream is closed (with a message
 * if the handler refused) once the pod side is done, which is when client-go closes its local
 * connection.
 */
export class PortForwardServer {
  readonly #handlers = new Map<string, PortHandler>();
  readonly #sessions = new Set<SpdySession>();
  readonly #wss = new WebSocketServer({
    noServer: true,
    // client-go writes every frame piece as its own message: they are small.
    maxPayload: 1024 * 1024,
  });

  constructor() {
    // The subprotocol is named in the 101 here, not negotiated by ws (see `handle`).
    this.#wss.on("headers", (headers) => headers.push(`Sec-WebSocket-Protocol: ${TUNNELED}`));
  }

  /** Serves `port` of a pod with `handler` from now on (instead of `echoPort`). */
  serve(namespace: string, pod: string, port: number, handler: PortHandler): void {
    this.#handlers.set(`${namespace}/${pod}/${port}`, handler);
  }

  /** Takes the Upgrade of a `portforward` request for an existing pod. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer, pod: { namespace: string; name: string }): void {
    const upgrade = (req.headers.upgrade ?? "").toLowerCase();
    const offered = (header: string | string[] | undefined) =>
      String(header ?? "")
        .split(",")
        .map((p) => p.trim());
    if (upgrade === "websocket" && offered(req.headers["sec-websocket-protocol"]).includes(TUNNELED)) {
      // ws rejects this subprotocol with a 400 ("/" is not an RFC 7230 token character) where Go's
      // servers take it, so it is hidden from ws; the "headers" listener puts it in the answer.
      // The request was recorded before, with the header.
      delete req.headers["sec-websocket-protocol"];
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#start(createWebSocketStream(ws), pod));
    } else if (
      upgrade === "spdy/3.1" &&
      offered(req.headers["x-stream-protocol-version"]).includes(PROTOCOL)
    ) {
      socket.write(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n" +
          `X-Stream-Protocol-Version: ${PROTOCOL}\r\n\r\n`,
      );
      if (head.length > 0) socket.unshift(head);
      this.#start(socket, pod);
    } else {
      // A refusal that is not a 101 is what makes kubectl fall back from the WebSocket to SPDY.
      const body = `unable to upgrade: port-forward needs ${TUNNELED} over a WebSocket or SPDY/3.1 with ${PROTOCOL}`;
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
  }

  close(): void {
    for (const session of this.#sessions) session.close();
    for (const ws of this.#wss.clients) ws.terminate();
    this.#wss.close();
  }

  #start(transport: Duplex, pod: { namespace: string; name: string }): void {
    const halfOpen = new Map<string, { error?: SpdyStream; data?: SpdyStream }>();
    const session = new SpdySession(transport, (stream) => {
      const type = stream.headers.get("streamtype");
      const requestId = stream.headers.get("requestid");
      if ((type !== "error" && type !== "data") || requestId === undefined) return stream.refuse();
      const pair = halfOpen.get(requestId) ?? {};
      if (pair[type] !== undefined || (!halfOpen.has(requestId) && halfOpen.size >= MAX_HALF_OPEN))
        return stream.refuse();
      // Replied at once, as the kubelet does: client-go waits for the reply to each stream before
      // it opens the next one.
      stream.reply();
      pair[type] = stream;
      if (pair.error === undefined || pair.data === undefined) {
        halfOpen.set(requestId, pair);
        stream.once("close", () => {
          if (halfOpen.get(requestId)?.[type] === stream) halfOpen.delete(requestId);
        });
        return;
      }
      halfOpen.delete(requestId);
      this.#forward(pair.error, pair.data, pod);
    });
    this.#sessions.add(session);
    transport.once("close", () => this.#sessions.delete(session));
  }

  #forward(error: SpdyStream, data: SpdyStream, pod: { namespace: string; name: string }): void {
    error.resume(); // the client sends nothing on it but its FIN
    // The kubelet closes the error stream when the pod side is done; client-go waits for that
    // before it lets go of the local connection.
    let done = false;
    const finish = (message?: string) => {
      if (done) return;
      done = true;
      if (message !== undefined) error.write(message);
      error.end();
    };
    data.once("finish", () => finish());
    data.once("close", () => finish());
    const port = Number(data.headers.get("port"));
    try {
      if (!Number.isInteger(port) || port < 1 || port > 65535)
        throw new Error(`invalid port ${JSON.stringify(data.headers.get("port"))}`);
      const target = { namespace: pod.namespace, pod: pod.name, port };
      const handler = this.#handlers.get(`${pod.namespace}/${pod.name}/${port}`) ?? echoPort;
      handler(data, target);
    } catch (err) {
      // The kubelet's wording, so that kubectl's output reads as against a real cluster.
      finish(
        `error forwarding port ${port} to pod ${pod.name}_${pod.namespace}, uid : ${(err as Error).message}`,
      );
      data.end();
    }
  }
}
