import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import { WebSocket } from "ws";
import type { MessagePath } from "../yamux/message-path.ts";
import { CloseCode } from "./constants.ts";
import type { InboundGate } from "./inbound-gate.ts";
import { createBinaryDuplex } from "./ws-duplex.ts";

type Listener = Parameters<EventEmitter["on"]>[1];

export type HttpVersion = "h1" | "h2";

export interface CloseInfo {
  /** WebSocket close code: received from the peer, or 1006 when the connection was lost. */
  code: number;
  reason: string;
  /** True when this end started the close. */
  local: boolean;
}

export interface ConnectionInit<I> {
  ws: WebSocket;
  httpVersion: HttpVersion;
  remoteAddress: string | undefined;
  identity: I;
  /** Runs once after the WebSocket closed (e.g. closes the dialer's HTTP/2 session). */
  onClosed?: () => void;
  /** Bounds the loop's time on this connection's input while it is new (the accepting side). */
  gate?: InboundGate;
}

/**
 * One established tunnel transport. `stream` carries the bytes (one write = one binary message);
 * 'close' fires once, on both ends, whichever end goes away.
 */
export class TransportConnection<I = undefined> extends EventEmitter {
  readonly stream: Duplex;
  /** For a yamux session over `stream`: each message without the Duplex's machinery (message-path.ts). */
  readonly messages: MessagePath;
  readonly ws: WebSocket;
  readonly httpVersion: HttpVersion;
  /** The negotiated WebSocket subprotocol. */
  readonly subprotocol: string;
  /** Peer address as seen on the socket (the proxy's when dialing through one). */
  readonly remoteAddress: string | undefined;
  /** On the accepting side, what `authenticate` returned; `undefined` on the dialing side. */
  readonly identity: I;
  /** Settles when the WebSocket has closed; never rejects. */
  readonly closed: Promise<CloseInfo>;

  #local = false;
  #closeInfo: CloseInfo | undefined;

  constructor(init: ConnectionInit<I>) {
    super();
    this.ws = init.ws;
    this.httpVersion = init.httpVersion;
    this.subprotocol = init.ws.protocol;
    this.remoteAddress = init.remoteAddress;
    this.identity = init.identity;
    const duplex = createBinaryDuplex(
      init.ws,
      {
        closedLocally: () => this.#local,
        close: (code, reason) => this.close(code, reason),
      },
      init.gate,
    );
    this.stream = duplex.stream;
    this.messages = duplex.messages;
    // The stream reports errors; this listener keeps a late ws error from being unhandled.
    init.ws.on("error", () => {});
    this.closed = new Promise((resolve) => {
      init.ws.on("close", (code: number, reason: Buffer) => {
        this.#closeInfo = { code, reason: reason.toString(), local: this.#local };
        init.onClosed?.();
        resolve(this.#closeInfo);
        this.emit("close", this.#closeInfo);
      });
    });
  }

  get isClosed(): boolean {
    return this.#closeInfo !== undefined;
  }

  /** Bytes accepted by ws but not yet written to the network. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  /** Graceful close: queued messages go first, then the closing handshake. Idempotent. */
  close(code: number = CloseCode.normal, reason = ""): void {
    if (this.ws.readyState === WebSocket.CLOSING || this.ws.readyState === WebSocket.CLOSED) return;
    this.#local = true;
    this.ws.close(code, reason);
  }

  /** Drops the connection at once. Idempotent. */
  destroy(): void {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.#local = true;
    this.ws.terminate();
  }

  override on(event: "close", listener: (info: CloseInfo) => void): this;
  override on(event: string | symbol, listener: Listener): this {
    return super.on(event, listener);
  }

  override once(event: "close", listener: (info: CloseInfo) => void): this;
  override once(event: string | symbol, listener: Listener): this {
    return super.once(event, listener);
  }
}
