import { EventEmitter, setMaxListeners } from "node:events";
import type { TransportConnection } from "../transport/connection.ts";
import { GoAwayCode, Session, type SessionOptions, type YamuxStream } from "../yamux/index.ts";
import { bindDraining } from "./stream-draining.ts";

export type TunnelOptions = Omit<SessionOptions, "client">;

export interface TunnelStats {
  openStreams: number;
  bytesIn: number;
  bytesOut: number;
  /** Last keepalive round trip in ms (0 until measured). */
  rttMs: number;
  /** Control frames (window updates, pings, RSTs) waiting for the connection; bounded by `maxControlQueue`. */
  queuedControlFrames: number;
  connectedAt: Date;
  remoteAddress: string | undefined;
}

export interface TunnelSessionEvents {
  /** A stream the other end opened. */
  stream: [stream: YamuxStream];
  /** The other end asked for no new streams here (it is draining). */
  goaway: [code: number];
  /**
   * The tunnel takes no new streams from now on: the first GoAway, whichever end sent it. Lets
   * what runs over its streams wind down (e.g. tell a gRPC connection's calls to move on).
   */
  draining: [];
  /** The tunnel is gone; `err` is set when it ended abnormally. */
  close: [err?: Error];
}

/**
 * A tunnel: one WebSocket, one yamux session over it, and who is on the other end.
 * The dialing side is the yamux client (odd stream ids), the accepting side the server.
 */
export class TunnelSession<I = undefined> extends EventEmitter<TunnelSessionEvents> {
  readonly identity: I;
  readonly role: "client" | "server";
  readonly #transport: TransportConnection<I>;
  readonly #mux: Session;
  readonly #connectedAt = new Date();
  #closeError: Error | undefined;
  #closed = false;
  #drainingEmitted = false;
  #drainingSignal: AbortController | undefined;

  constructor(transport: TransportConnection<I>, role: "client" | "server", options: TunnelOptions = {}) {
    super();
    // What lives as long as a stream on this tunnel (a feed, a call) ends with the tunnel: one close
    // listener per stream is the design, bounded by the streams a session allows, not a leak.
    this.setMaxListeners(64 + (options.maxStreams ?? 4096));
    this.identity = transport.identity;
    this.role = role;
    this.#transport = transport;
    this.#mux = new Session(transport.stream, { ...options, client: role === "client" }, transport.messages);
    this.#mux.on("stream", (s) => {
      if (this.listenerCount("stream") > 0) this.emit("stream", s);
      else s.destroy(); // nobody serves inbound streams on this end: refuse rather than leak
    });
    this.#mux.on("goaway", (code) => {
      this.emit("goaway", code);
      this.#startedDraining();
    });
    this.#mux.on("close", (err) => {
      this.#closed = true;
      this.#closeError = err;
      // No transport.close() here: the session has ended its Duplex, which closes the WebSocket
      // only after the frames still queued (a last FIN, a GoAway) have gone out.
      this.emit("close", err);
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Why the tunnel ended, if it ended abnormally. */
  get closeError(): Error | undefined {
    return this.#closeError;
  }

  /** True once either end has sent GoAway: the tunnel takes no new streams. */
  get draining(): boolean {
    return this.#mux.goingAway;
  }

  /**
   * Aborts once the tunnel drains (GoAway either way) or closes: what is bound to this tunnel (a
   * kept-alive HTTP connection, a long stream) should wind down and go to its successor. Made on
   * first use.
   */
  get drainingSignal(): AbortSignal {
    if (!this.#drainingSignal) {
      const controller = new AbortController();
      // One listener per kept-alive connection or long stream bound to this tunnel.
      setMaxListeners(0, controller.signal);
      this.#drainingSignal = controller;
      if (this.draining || this.#closed) controller.abort();
      else {
        const abort = () => {
          this.off("draining", abort);
          this.off("close", abort);
          controller.abort();
        };
        this.on("draining", abort);
        this.on("close", abort);
      }
    }
    return this.#drainingSignal.signal;
  }

  get stats(): TunnelStats {
    const s = this.#mux.stats;
    return { ...s, connectedAt: this.#connectedAt, remoteAddress: this.#transport.remoteAddress };
  }

  /** A stream to the other end; `drainingSignalOf(stream)` tells when this tunnel starts going away. */
  async open(): Promise<YamuxStream> {
    const stream = await this.#mux.open();
    bindDraining(stream, this.drainingSignal);
    return stream;
  }

  ping(timeoutMs?: number): Promise<number> {
    return this.#mux.ping(timeoutMs);
  }

  goAway(code: GoAwayCode = GoAwayCode.Normal): void {
    this.#mux.goAway(code);
    this.#startedDraining();
  }

  /**
   * Graceful end: GoAway, then wait for the streams in flight to finish (at most `graceMs`, if
   * given), then close. Resolves when closed.
   */
  async close(graceMs?: number): Promise<void> {
    if (this.#closed) return;
    this.goAway();
    const timer = graceMs === undefined ? undefined : setTimeout(() => this.destroy(), graceMs);
    await new Promise<void>((resolve) => {
      const check = () => {
        if (!this.#closed && this.#mux.stats.openStreams > 0) return;
        this.#mux.off("streamClosed", check);
        this.off("close", check);
        resolve();
      };
      this.#mux.on("streamClosed", check);
      this.once("close", check);
      check();
    });
    clearTimeout(timer);
    this.destroy();
  }

  #startedDraining(): void {
    if (this.#drainingEmitted || !this.draining) return;
    this.#drainingEmitted = true;
    this.emit("draining");
  }

  /** Closes at once; streams still open are cut. */
  destroy(err?: Error): void {
    this.#mux.destroy(err);
  }
}
