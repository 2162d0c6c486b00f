import { Duplex } from "node:stream";
import { errors, type YamuxError } from "./errors.ts";
import { Flag, FrameType, INITIAL_WINDOW } from "./frame.ts";

/** A writev batch up to this size is joined into one frame (the writer copies payloads this small anyway). */
const JOIN_MAX = 16 * 1024;

/** What a stream needs from its session; keeps the session's internals out of the public stream. */
export interface StreamHost {
  readonly closed: boolean;
  readonly maxFrameSize: number;
  readonly maxStreamWindow: number;
  readonly streamOpenTimeoutMs: number;
  readonly streamCloseTimeoutMs: number;
  readonly rttMs: number;
  /** Asks for an RTT sample (one ping) where none was taken: keepalive off gives none of its own. */
  sampleRtt(): void;
  /**
   * The largest receive window auto-tuning has given a stream of this session: the path's
   * bandwidth-delay product as this session's fast readers have shown it.
   */
  readonly tunedWindow: number;
  /** A stream's receive window grew to `window`. */
  windowTuned(window: number): void;
  readonly writable: boolean;
  /** Jumps the queue: window updates, SYN, ACK, RST. */
  sendControl(type: FrameType, flags: number, streamId: number, length: number): void;
  /** Queued behind this stream's data: FIN must not overtake the bytes it ends. */
  sendFin(streamId: number): void;
  /** Queues a Data frame; `done` runs once the payload has been copied out. */
  sendData(streamId: number, payload: Uint8Array, done?: (err?: Error | null) => void): void;
  waitWritable(fn: () => void): void;
  /** Frames sent between cork() and uncork() leave in one write to the connection. */
  cork(): void;
  uncork(): void;
  /** The stream no longer needs frames routed to it. */
  release(streamId: number): void;
}

interface WriteJob {
  chunks: Buffer[];
  /** Position in chunks[index]. */
  index: number;
  /** The last chunk with bytes in it: its last frame carries the callback. */
  lastIndex: number;
  offset: number;
  callback: (err?: Error | null) => void;
}

/**
 * One yamux stream as a Node Duplex. `end()` sends FIN, `destroy()` sends RST.
 *
 * Receive credit is returned only for bytes the application has consumed (pushed minus still
 * buffered), so a reader that stops reading holds its sender to one window.
 */
export class YamuxStream extends Duplex {
  readonly id: number;
  readonly #host: StreamHost;
  #sendWindow = INITIAL_WINDOW;
  /** Total bytes the peer may send us so far; grows with every window update we send. */
  #recvLimit = INITIAL_WINDOW;
  #received = 0;
  #window = INITIAL_WINDOW;
  /** When the last window update left (at first: when the stream was made), for auto-tuning. */
  #lastCreditAt: number;
  #job: WriteJob | null = null;
  #waitingWritable = false;
  #localFin = false;
  #remoteFin = false;
  #released = false;
  #awaitingAck = false;
  /** The frame being handled is the peer's first answer to our SYN. */
  #firstAnswer = false;
  /** Handed to the application (opened, or accepted): only then are errors worth emitting. */
  #owned = false;
  #openTimer: NodeJS.Timeout | undefined;
  /** Runs from our FIN until the peer's: a peer may not hold the stream half-open forever. */
  #closeTimer: NodeJS.Timeout | undefined;
  /** Bytes of payload sent and received, for stats. */
  bytesSent = 0;
  bytesReceived = 0;

  constructor(host: StreamHost, id: number) {
    // A writer may keep one frame's worth queued beyond the one being sent: enough for writev
    // batches to keep the connection busy, small next to the window the peer buffers.
    super({ allowHalfOpen: true, readableHighWaterMark: INITIAL_WINDOW, writableHighWaterMark: 64 * 1024 });
    this.#host = host;
    this.id = id;
    this.#lastCreditAt = performance.now();
  }

  /** Current receive window (grows with auto-tuning up to the session's maximum). */
  get receiveWindow(): number {
    return this.#window;
  }

  /** Opener side: announce the stream and wait (bounded) for the peer's ACK. */
  sendSyn(): void {
    this.#host.sendControl(FrameType.WindowUpdate, Flag.SYN, this.id, 0);
    this.#owned = true;
    this.#awaitingAck = true;
    const ms = this.#host.streamOpenTimeoutMs;
    if (ms > 0) {
      this.#openTimer = setTimeout(() => this.destroy(errors.openTimeout(ms)), ms);
      this.#openTimer.unref();
    }
  }

  /** Acceptor side: tell the peer the stream is accepted. */
  sendAck(): void {
    this.#owned = true;
    if (!this.#released) this.#host.sendControl(FrameType.WindowUpdate, Flag.ACK, this.id, 0);
  }

  /** Returns false when the peer overran the window we granted (a protocol error). */
  receiveData(payload: Buffer): boolean {
    this.#acknowledged();
    if (this.#received + payload.length > this.#recvLimit) return false;
    this.#received += payload.length;
    this.bytesReceived += payload.length;
    if (this.#remoteFin || this.destroyed) return true;
    if (payload.length > 0) this.push(payload);
    this.#credit();
    return true;
  }

  addSendWindow(delta: number): void {
    this.#acknowledged();
    if (delta === 0) return;
    this.#sendWindow += delta;
    this.#pump();
  }

  receiveFlags(flags: number): void {
    if (flags & Flag.RST) {
      // A reset as the peer's first answer means it refused the stream.
      const refused = this.#firstAnswer;
      this.#clearOpenTimer();
      this.abort(refused ? errors.refused() : errors.reset());
      return;
    }
    if (flags & Flag.FIN && !this.#remoteFin) {
      this.#remoteFin = true;
      clearTimeout(this.#closeTimer);
      this.push(null);
      if (this.#localFin) this.#release();
    }
  }

  /** The session went away under the stream. */
  abort(err?: YamuxError): void {
    this.#release();
    // A stream nobody holds yet has no error listener: it just goes.
    this.destroy(this.#owned ? err : undefined);
  }

  // Node calls _read() only once per push, so consumption is observed where it happens: every
  // read(), which flowing mode, pipe() and async iteration all go through.
  override read(size?: number): ReturnType<Duplex["read"]> {
    const chunk = super.read(size);
    if (chunk !== null) this.#credit();
    return chunk;
  }

  override _read(): void {
    this.#credit();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.#job = { chunks: [chunk], index: 0, lastIndex: chunk.length > 0 ? 0 : -1, offset: 0, callback };
    this.#pump();
  }

  override _writev(
    chunks: Array<{ chunk: Buffer; encoding: BufferEncoding }>,
    callback: (err?: Error | null) => void,
  ): void {
    const list = chunks.map((c) => c.chunk);
    let total = 0;
    for (const c of list) total += c.length;
    if (total <= JOIN_MAX) {
      // One frame for a small batch (node:http2's HEADERS, DATA frame header and gRPC message; an
      // HTTP head and a short body): the far end then takes one frame, one push, one read into
      // nghttp2, where it took one per chunk. In bench:rpc a unary call went from 3 such reads on
      // the agent and 4 on kas to 1 and 2.
      this._write(Buffer.concat(list, total), "buffer" as BufferEncoding, callback);
      return;
    }
    const lastIndex = list.findLastIndex((c) => c.length > 0);
    this.#job = { chunks: list, index: 0, lastIndex, offset: 0, callback };
    this.#pump();
  }

  override _final(callback: (err?: Error | null) => void): void {
    if (this.#released) {
      callback(errors.sessionClosed());
      return;
    }
    this.#localFin = true;
    this.#host.sendFin(this.id);
    if (this.#remoteFin) this.#release();
    else if (this.#host.streamCloseTimeoutMs > 0) {
      const ms = this.#host.streamCloseTimeoutMs;
      this.#closeTimer = setTimeout(() => this.destroy(errors.closeTimeout(ms)), ms);
      this.#closeTimer.unref();
    }
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#clearOpenTimer();
    clearTimeout(this.#closeTimer);
    if (!this.#released && !this.#host.closed) {
      this.#host.sendControl(FrameType.WindowUpdate, Flag.RST, this.id, 0);
    }
    this.#release();
    const job = this.#job;
    this.#job = null;
    job?.callback(err ?? errors.reset());
    callback(err);
  }

  #pump(): void {
    const job = this.#job;
    if (job === null || this.#released) return;
    if (job.chunks.length === 1) {
      this.#pumpJob(job);
      return;
    }
    // The chunks of one writev (node:http2's HEADERS and DATA, an HTTP head and its body) leave
    // together, as one WebSocket message.
    this.#host.cork();
    try {
      this.#pumpJob(job);
    } finally {
      this.#host.uncork();
    }
  }

  #pumpJob(job: WriteJob): void {
    const host = this.#host;
    while (job.index < job.chunks.length) {
      const chunk = job.chunks[job.index]!;
      if (job.offset === chunk.length) {
        job.index++;
        job.offset = 0;
        continue;
      }
      if (this.#sendWindow === 0) return; // resumed by addSendWindow
      if (!host.writable) {
        if (!this.#waitingWritable) {
          this.#waitingWritable = true;
          host.waitWritable(() => {
            this.#waitingWritable = false;
            this.#pump();
          });
        }
        return;
      }
      const n = Math.min(chunk.length - job.offset, this.#sendWindow, host.maxFrameSize);
      const payload = n === chunk.length ? chunk : chunk.subarray(job.offset, job.offset + n);
      job.offset += n;
      this.#sendWindow -= n;
      this.bytesSent += n;
      if (job.index === job.lastIndex && job.offset === chunk.length) {
        // The write completes once its last frame is copied or taken by the connection, not
        // before: the caller may reuse its buffers then. The callback may start the next write
        // at once (Node flushes buffered writes from it), so this job is finished first.
        this.#job = null;
        host.sendData(this.id, payload, job.callback);
        return;
      }
      host.sendData(this.id, payload);
    }
    // Nothing but empty chunks: no frame carries the callback.
    this.#job = null;
    job.callback();
  }

  /**
   * Grants the peer more window once the application has consumed at least half of it. If half
   * the window was consumed within a few round trips of the last grant (or of the stream's start),
   * the window grows, up to the maximum, so that a fast reader on a long path is not held back by
   * the initial 256 KiB: it doubles, and jumps at once to the largest window a stream of this
   * session has grown to. A path's bandwidth-delay product belongs to the session, not to one
   * stream (HTTP/2's BDP estimation sets the window of every stream of its connection alike), so
   * a new stream with a fast reader skips the round trips of doubling its way up again. Growth
   * still needs this stream's own reader to keep up: a stream nobody reads holds its peer to the
   * initial window, and none holds more than `maxStreamWindow`.
   */
  #credit(): void {
    if (this.#remoteFin || this.#released) return;
    const consumed = this.#received - this.readableLength;
    let delta = consumed + this.#window - this.#recvLimit;
    if (delta < this.#window / 2) return;
    const now = performance.now();
    const host = this.#host;
    const rtt = host.rttMs;
    if (rtt === 0) host.sampleRtt();
    if (rtt > 0 && now - this.#lastCreditAt < 4 * rtt && this.#window < host.maxStreamWindow) {
      const grown = Math.min(Math.max(this.#window * 2, host.tunedWindow), host.maxStreamWindow);
      delta += grown - this.#window;
      this.#window = grown;
      host.windowTuned(grown);
    }
    this.#lastCreditAt = now;
    this.#recvLimit += delta;
    host.sendControl(FrameType.WindowUpdate, 0, this.id, delta);
  }

  /**
   * Any frame from the peer proves the stream exists there: the reference never sends the ACK
   * for a stream half-closed before it was accepted, and answers with Data and FIN instead.
   */
  #acknowledged(): void {
    this.#firstAnswer = this.#awaitingAck;
    if (!this.#awaitingAck) return;
    this.#awaitingAck = false;
    this.#clearOpenTimer();
  }

  #clearOpenTimer(): void {
    if (this.#openTimer !== undefined) {
      clearTimeout(this.#openTimer);
      this.#openTimer = undefined;
    }
  }

  #release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#host.release(this.id);
  }
}
