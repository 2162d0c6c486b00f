import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import { FrameDecoder } from "./decoder.ts";
import { errors, ProtocolError, type YamuxError } from "./errors.ts";
import {
  Flag,
  type FrameHeader,
  FrameType,
  GoAwayCode,
  type GoAwayCode as GoAwayCodeT,
  INITIAL_WINDOW,
} from "./frame.ts";
import { joinKeepAlive, type KeepAliveTick, leaveKeepAlive } from "./keepalive-wheel.ts";
import type { MessagePath } from "./message-path.ts";
import { type ResolvedOptions, resolveOptions, type SessionOptions } from "./options.ts";
import { type StreamHost, YamuxStream } from "./stream.ts";
import { FrameWriter } from "./writer.ts";

export interface SessionStats {
  openStreams: number;
  /** Wire bytes, headers included. */
  bytesIn: number;
  bytesOut: number;
  /** Last measured round trip in ms; 0 until the first ping returns. */
  rttMs: number;
  /** Control frames waiting for the connection: at most `maxControlQueue`, and a last GoAway. */
  queuedControlFrames: number;
}

interface PendingPing {
  start: number;
  resolve: (rttMs: number) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

interface AcceptWaiter {
  resolve: (stream: YamuxStream) => void;
  reject: (err: Error) => void;
}

export interface SessionEvents {
  /** An inbound stream, already acknowledged. Without listeners streams wait for accept(). */
  stream: [stream: YamuxStream];
  /** The peer sent GoAway: it accepts no new streams; existing ones go on. */
  goaway: [code: number];
  /** A stream left the session's table (both sides closed it, or it was reset). */
  streamClosed: [id: number];
  /** The session is over; `err` is set when it ended abnormally. */
  close: [err?: Error];
}

/**
 * A yamux session over any byte-stream Duplex (a WebSocket stream, a TCP socket).
 * Wire-compatible with hashicorp/yamux.
 */
export class Session extends EventEmitter<SessionEvents> {
  readonly #conn: Duplex;
  readonly #opts: ResolvedOptions;
  readonly #decoder: FrameDecoder;
  readonly #writer: FrameWriter;
  readonly #streams = new Map<number, YamuxStream>();
  readonly #host: StreamHost;
  #nextId: number;
  #backlog: YamuxStream[] = [];
  #acceptWaiters: AcceptWaiter[] = [];
  #pings = new Map<number, PendingPing>();
  #nextPing = 0;
  #rttMs = 0;
  #sampling = false;
  /** This session's place on the shared keepalive timer (see keepalive-wheel.ts). */
  #keepAlive: KeepAliveTick | undefined;
  #localGoAway = false;
  #remoteGoAway = false;
  #closed = false;
  #bytesIn = 0;
  /** bytesIn at the last keepalive check. */
  #bytesSeen = 0;

  /**
   * `messages`: the connection's shortcuts, when it carries whole messages (see message-path.ts);
   * without it the session reads and writes `conn` alone.
   */
  constructor(conn: Duplex, options: SessionOptions, messages?: MessagePath) {
    super();
    this.#conn = conn;
    this.#opts = resolveOptions(options);
    this.#nextId = this.#opts.client ? 1 : 2;
    const o = this.#opts;
    this.#writer = new FrameWriter(
      conn,
      {
        maxWrite: o.maxWriteSize,
        highWater: o.writeBufferSize,
        maxControl: o.maxControlQueue,
        writeTimeoutMs: o.connectionWriteTimeoutMs,
      },
      (err) => this.#fail(err, GoAwayCode.InternalError),
      messages,
    );
    this.#decoder = new FrameDecoder(this.#opts.maxStreamWindow, (h, p) => this.#onFrame(h, p));
    this.#host = new SessionHost(this, this.#writer, this.#opts, (id) => this.#release(id));

    // `on`, not `once`, for events that fire at most once: once() wraps each listener in a bound
    // function plus a state object, and a tunnel carries about a dozen such listeners on its layers.
    conn.on("end", () => this.destroy());
    conn.on("close", () => this.destroy());
    conn.on("error", (err) => this.destroy(err));
    const onData = (chunk: Buffer) => this.#onData(chunk);
    if (messages) messages.receive(onData);
    else conn.on("data", onData);

    if (this.#opts.keepAliveIntervalMs > 0) {
      this.#keepAlive = () => this.#keepAliveTick();
      joinKeepAlive(this.#opts.keepAliveIntervalMs, this.#keepAlive);
      this.#keepAliveTick(); // an early RTT sample lets window auto-tuning start at once
    }
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** True once either side has sent GoAway: the peer's, or both sides', new streams are refused. */
  get goingAway(): boolean {
    return this.#localGoAway || this.#remoteGoAway;
  }

  get rttMs(): number {
    return this.#rttMs;
  }

  get stats(): SessionStats {
    return {
      openStreams: this.#streams.size,
      bytesIn: this.#bytesIn,
      bytesOut: this.#writer.bytesWritten,
      rttMs: this.#rttMs,
      queuedControlFrames: this.#writer.controlQueued,
    };
  }

  /** Opens a stream; data may be written at once, before the peer acknowledges it. */
  async open(): Promise<YamuxStream> {
    if (this.#closed) throw errors.sessionClosed();
    // As in the reference, our own GoAway refuses the peer's new streams, not ours.
    if (this.#remoteGoAway) throw errors.remoteGoAway();
    if (this.#streams.size >= this.#opts.maxStreams) throw errors.tooManyStreams(this.#opts.maxStreams);
    const id = this.#nextId;
    if (id > 0xffffffff) throw errors.idsExhausted();
    this.#nextId += 2;
    const stream = new YamuxStream(this.#host, id);
    this.#streams.set(id, stream);
    stream.sendSyn();
    return stream;
  }

  /** Waits for the next inbound stream (used when nobody listens for "stream"). */
  accept(): Promise<YamuxStream> {
    const queued = this.#backlog.shift();
    if (queued) {
      queued.sendAck();
      return Promise.resolve(queued);
    }
    if (this.#closed) return Promise.reject(errors.sessionClosed());
    return new Promise((resolve, reject) => this.#acceptWaiters.push({ resolve, reject }));
  }

  /** Round trip time in ms; rejects if the peer does not answer within `timeoutMs`. */
  ping(timeoutMs = this.#opts.keepAliveTimeoutMs): Promise<number> {
    if (this.#closed) return Promise.reject(errors.sessionClosed());
    const opaque = this.#nextPing;
    this.#nextPing = (this.#nextPing + 1) >>> 0;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pings.delete(opaque);
        reject(errors.pingTimeout(timeoutMs));
      }, timeoutMs);
      timer.unref();
      this.#pings.set(opaque, { start: performance.now(), resolve, reject, timer });
      this.#writer.control(FrameType.Ping, Flag.SYN, 0, opaque);
    });
  }

  /**
   * Takes one RTT sample if there is none yet and none under way: with keepalive off, the first
   * stream whose receive window fills asks for it, so that window auto-tuning can start (the one
   * sample then stands for the path). A ping that is not answered only means no sample.
   */
  sampleRtt(): void {
    if (this.#rttMs > 0 || this.#sampling || this.#closed) return;
    this.#sampling = true;
    const done = () => {
      this.#sampling = false;
    };
    this.ping().then(done, done);
  }

  /** Tells the peer to open no new streams here; existing streams finish normally. */
  goAway(code: GoAwayCodeT = GoAwayCode.Normal): void {
    if (this.#closed || this.#localGoAway) return;
    this.#localGoAway = true;
    this.#writer.control(FrameType.GoAway, 0, 0, code);
  }

  /**
   * Ends the session: every stream is destroyed (with an error only if `err` is given), queued
   * frames are flushed, the connection ends.
   */
  destroy(err?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#keepAlive) leaveKeepAlive(this.#opts.keepAliveIntervalMs, this.#keepAlive);
    this.#decoder.stop();
    const cause = errors.sessionClosed(err);
    for (const p of this.#pings.values()) {
      clearTimeout(p.timer);
      p.reject(cause);
    }
    this.#pings.clear();
    for (const w of this.#acceptWaiters) w.reject(cause);
    this.#acceptWaiters = [];
    // A clean close ends streams quietly (readers see 'close' without 'end', as with a socket);
    // an abnormal one tells each stream why.
    for (const s of [...this.#streams.values()]) s.abort(err ? cause : undefined);
    this.#streams.clear();
    this.#backlog = [];
    this.#writer.close();
    const conn = this.#conn;
    if (!conn.destroyed) {
      conn.end();
      // The backstop goes once the connection closes: it would hold the connection, and through
      // its listeners this session and its tunnel, for closeTimeoutMs after every departure.
      const backstop = setTimeout(() => conn.destroy(), this.#opts.closeTimeoutMs).unref();
      conn.once("close", () => clearTimeout(backstop));
    }
    this.emit("close", err);
  }

  #onData(chunk: Buffer): void {
    this.#bytesIn += chunk.length;
    try {
      this.#decoder.push(chunk);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      this.#fail(err, GoAwayCode.ProtocolError);
    }
  }

  /** Abnormal end: say why with GoAway, then close. */
  #fail(err: Error, code: GoAwayCodeT): void {
    if (this.#closed) return;
    // Sent even after a normal GoAway: the peer should learn why the session ends.
    this.#writer.control(FrameType.GoAway, 0, 0, code);
    this.destroy(err);
  }

  #onFrame(h: FrameHeader, payload: Buffer | undefined): void {
    switch (h.type) {
      case FrameType.Data:
      case FrameType.WindowUpdate:
        this.#onStreamFrame(h, payload);
        break;
      case FrameType.Ping:
        this.#onPing(h);
        break;
      case FrameType.GoAway:
        this.#onGoAway(h.length);
        break;
    }
  }

  #onStreamFrame(h: FrameHeader, payload: Buffer | undefined): void {
    if (h.streamId === 0) throw new ProtocolError("stream frame on stream 0");
    let stream = this.#streams.get(h.streamId);
    let inbound = false;
    if (h.flags & Flag.SYN) {
      if (stream) throw new ProtocolError(`duplicate SYN for stream ${h.streamId}`);
      stream = this.#incoming(h.streamId);
      inbound = true;
    }
    // Frames for streams already gone (reset, refused) are dropped, as the reference does.
    if (!stream) return;
    if (h.type === FrameType.Data) {
      if (!stream.receiveData(payload ?? EMPTY)) {
        throw new ProtocolError(`stream ${h.streamId} exceeded its receive window`);
      }
    } else {
      stream.addSendWindow(h.length);
    }
    if (h.flags & (Flag.ACK | Flag.FIN | Flag.RST)) stream.receiveFlags(h.flags);
    if (inbound) this.#deliver(stream);
  }

  #incoming(id: number): YamuxStream | undefined {
    const ours = this.#opts.client ? 1 : 0;
    if (id % 2 === ours) throw new ProtocolError(`peer opened stream ${id} with our id parity`);
    const backlogFull =
      this.listenerCount("stream") === 0 &&
      this.#acceptWaiters.length === 0 &&
      this.#backlog.length >= this.#opts.acceptBacklog;
    if (this.#localGoAway || this.#streams.size >= this.#opts.maxStreams || backlogFull) {
      this.#writer.control(FrameType.WindowUpdate, Flag.RST, id, 0);
      return undefined;
    }
    const stream = new YamuxStream(this.#host, id);
    this.#streams.set(id, stream);
    return stream;
  }

  #deliver(stream: YamuxStream): void {
    if (stream.destroyed) return;
    const waiter = this.#acceptWaiters.shift();
    if (waiter) {
      stream.sendAck();
      waiter.resolve(stream);
    } else if (this.listenerCount("stream") > 0) {
      stream.sendAck();
      this.emit("stream", stream);
    } else {
      this.#backlog.push(stream);
    }
  }

  /** A stream is done: it leaves the table (and the accept backlog, if it never got out of it). */
  #release(id: number): void {
    if (!this.#streams.delete(id)) return;
    const i = this.#backlog.findIndex((s) => s.id === id);
    if (i >= 0) this.#backlog.splice(i, 1);
    this.emit("streamClosed", id);
  }

  #onPing(h: FrameHeader): void {
    if (h.flags & Flag.SYN) {
      this.#writer.pong(h.length);
      return;
    }
    const p = this.#pings.get(h.length);
    if (!p) return; // answer to a ping that already timed out
    this.#pings.delete(h.length);
    clearTimeout(p.timer);
    this.#rttMs = performance.now() - p.start;
    p.resolve(this.#rttMs);
  }

  #onGoAway(code: number): void {
    this.#remoteGoAway = true;
    this.emit("goaway", code);
    // As the reference does, any code but Normal ends the session at once.
    if (code !== GoAwayCode.Normal) this.destroy(errors.peerFailed(code));
  }

  /**
   * Pings only a quiet peer: bytes received since the last check already prove it alive. With
   * thousands of idle tunnels whose other ends ping on their own, this halves the keepalive work.
   * They do not prove it reads ours, though: while our writes are stuck, it is pinged all the same.
   */
  #keepAliveTick(): void {
    if (this.#bytesIn !== this.#bytesSeen && !this.#writer.congested) {
      this.#bytesSeen = this.#bytesIn;
      return;
    }
    this.ping().then(
      () => {
        this.#bytesSeen = this.#bytesIn; // our own pong does not count as the peer speaking
      },
      (err: YamuxError) => {
        if (err.code === "ETIMEDOUT") this.destroy(err);
      },
    );
  }
}

/**
 * What the streams of one session use of it: limits, the writer, and the way out of its table.
 * A class rather than an object literal: V8 keeps literals with getters in dictionary mode, which
 * costs about a kilobyte per session.
 */
class SessionHost implements StreamHost {
  readonly maxFrameSize: number;
  readonly maxStreamWindow: number;
  readonly streamOpenTimeoutMs: number;
  readonly streamCloseTimeoutMs: number;
  tunedWindow = INITIAL_WINDOW;
  readonly #session: Session;
  readonly #writer: FrameWriter;
  readonly #release: (id: number) => void;

  constructor(session: Session, writer: FrameWriter, opts: ResolvedOptions, release: (id: number) => void) {
    this.maxFrameSize = opts.maxFrameSize;
    this.maxStreamWindow = opts.maxStreamWindow;
    this.streamOpenTimeoutMs = opts.streamOpenTimeoutMs;
    this.streamCloseTimeoutMs = opts.streamCloseTimeoutMs;
    this.#session = session;
    this.#writer = writer;
    this.#release = release;
  }

  get closed(): boolean {
    return this.#session.closed;
  }

  get rttMs(): number {
    return this.#session.rttMs;
  }

  sampleRtt(): void {
    this.#session.sampleRtt();
  }

  get writable(): boolean {
    return this.#writer.writable;
  }

  windowTuned(window: number): void {
    if (window > this.tunedWindow) this.tunedWindow = window;
  }

  sendControl(type: FrameType, flags: number, id: number, length: number): void {
    this.#writer.control(type, flags, id, length);
  }

  sendFin(id: number): void {
    this.#writer.ordered(FrameType.WindowUpdate, Flag.FIN, id, undefined);
  }

  sendData(id: number, payload: Uint8Array, done?: (err?: Error | null) => void): void {
    this.#writer.ordered(FrameType.Data, 0, id, payload, done);
  }

  waitWritable(fn: () => void): void {
    this.#writer.waitWritable(fn);
  }

  cork(): void {
    this.#writer.cork();
  }

  uncork(): void {
    this.#writer.uncork();
  }

  release(id: number): void {
    this.#release(id);
  }
}

const EMPTY = Buffer.alloc(0);
