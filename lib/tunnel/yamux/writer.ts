import type { Duplex } from "node:stream";
import { errors } from "./errors.ts";
import { Flag, FrameType, HEADER_SIZE, writeHeader } from "./frame.ts";
import type { MessagePath } from "./message-path.ts";

type Done = (err?: Error | null) => void;

/** Payloads this large are handed to the connection by reference instead of being copied. */
const ZERO_COPY_MIN = 16 * 1024;

interface QueuedFrame {
  type: FrameType;
  flags: number;
  streamId: number;
  /** Payload view for Data frames (the caller's bytes, not copied yet). */
  payload: Uint8Array | undefined;
  /** The header's length field: payload size, window delta, ping opaque or GoAway code. */
  length: number;
  /** Runs once the caller may reuse its buffer (copied, or taken by the connection). */
  done: Done | undefined;
}

export interface WriterLimits {
  /** A single write to the connection coalesces frames up to this size. */
  maxWrite: number;
  /** Data bytes queued before writers are asked to wait. */
  highWater: number;
  /** Control frames queued behind a congested connection before the writer gives up. */
  maxControl: number;
  /** Congested this long without the connection taking our bytes, the writer gives up; 0: never. */
  writeTimeoutMs: number;
}

/**
 * Output side of a session. Control frames go first, so pings and window updates never wait
 * behind bulk data. Frames queued in one tick go out together (see #schedule and #write). The
 * writer of a payload is told (`done`) once the connection has taken it, which also holds
 * producers back while the connection is congested. Data queues up to `highWater` bytes before
 * writers are asked to wait (`waitWritable`).
 *
 * Control frames cannot wait (they are answers the peer provokes), so they are bounded instead:
 * past `maxControl` behind a congested connection, or `writeTimeoutMs` congested without progress,
 * the writer reports `onFail` and the session ends. Pongs are coalesced while congested.
 */
export class FrameWriter {
  readonly #conn: Duplex;
  readonly #messages: MessagePath | undefined;
  readonly #maxWrite: number;
  readonly #highWater: number;
  readonly #maxControl: number;
  readonly #writeTimeoutMs: number;
  readonly #onFail: (err: Error) => void;
  #control: QueuedFrame[] = [];
  /** The answer to the peer's ping still in #control: while congested, newer pings reuse it. */
  #pong: QueuedFrame | undefined;
  #data: QueuedFrame[] = [];
  #dataBytes = 0;
  #scheduled = false;
  #busyTick = false;
  /** Inside cork()/uncork(): frames wait for the uncork instead of going out one by one. */
  #corked = 0;
  #congested = false;
  /** performance.now() when the current congestion began. */
  #congestedSince = 0;
  /** One timer per session, armed only while congested (not one per frame). */
  #stallTimer: NodeJS.Timeout | undefined;
  #closed = false;
  #waiters: Array<() => void> = [];
  bytesWritten = 0;

  constructor(conn: Duplex, limits: WriterLimits, onFail: (err: Error) => void, messages?: MessagePath) {
    this.#conn = conn;
    this.#messages = messages;
    this.#maxWrite = limits.maxWrite;
    this.#highWater = limits.highWater;
    this.#maxControl = limits.maxControl;
    this.#writeTimeoutMs = limits.writeTimeoutMs;
    this.#onFail = onFail;
    conn.on("drain", () => {
      this.#congested = false;
      this.#flush();
    });
  }

  /** Control frames waiting for the connection. */
  get controlQueued(): number {
    return this.#control.length;
  }

  /** The connection has not taken our last write yet. */
  get congested(): boolean {
    return this.#congested;
  }

  get writable(): boolean {
    return !this.#closed && this.#dataBytes < this.#highWater;
  }

  /**
   * A frame without payload that jumps the queue (window update, ping, GoAway, SYN, ACK, RST).
   * GoAway is always taken: it is how the session says why it ends, overflow included.
   */
  control(type: FrameType, flags: number, streamId: number, length: number): void {
    if (this.#closed) return;
    if (this.#control.length >= this.#maxControl && type !== FrameType.GoAway && !this.#makeRoom()) return;
    this.#control.push({ type, flags, streamId, payload: undefined, length, done: undefined });
    this.#schedule();
  }

  /** Answers the peer's ping; while congested only the newest answer waits (the peer wants one). */
  pong(opaque: number): void {
    if (this.#congested && this.#pong !== undefined) {
      this.#pong.length = opaque;
      return;
    }
    this.control(FrameType.Ping, Flag.ACK, 0, opaque);
    this.#pong = this.#control.at(-1);
  }

  /** A frame kept in order with the data frames (a Data frame, or the FIN that ends them). */
  ordered(
    type: FrameType,
    flags: number,
    streamId: number,
    payload: Uint8Array | undefined,
    done?: Done,
  ): void {
    if (this.#closed) {
      done?.(new Error("yamux session closed"));
      return;
    }
    const length = payload?.length ?? 0;
    if (length < ZERO_COPY_MIN && this.#idle()) {
      this.#writeNow(type, flags, streamId, payload, length);
      done?.();
      return;
    }
    this.#data.push({ type, flags, streamId, payload, length, done });
    this.#dataBytes += HEADER_SIZE + length;
    this.#schedule();
  }

  /**
   * Frames queued until the matching uncork() go out together, in one write: a stream hands over
   * all the chunks of one writev this way. Without it the first frame of a tick went out alone (see
   * #schedule), so node:http2's HEADERS + DATA, written as one writev, became two WebSocket
   * messages: a gRPC unary call took 5 messages instead of 3.
   */
  cork(): void {
    this.#corked++;
  }

  uncork(): void {
    if (--this.#corked > 0 || !this.#scheduled || this.#congested || this.#busyTick) return;
    this.#busyTick = true;
    this.#flush();
  }

  /** Calls `fn` once the data queue has room again. */
  waitWritable(fn: () => void): void {
    this.#waiters.push(fn);
  }

  /**
   * Writes what can be written now, then refuses more; frames left behind are failed. A GoAway
   * still queued goes out past congestion: one small frame, for a peer that reads again later.
   */
  close(): void {
    if (this.#closed) return;
    this.#flush();
    this.#closed = true;
    clearTimeout(this.#stallTimer);
    const goAways = this.#control.filter((f) => f.type === FrameType.GoAway);
    if (goAways.length > 0 && this.#conn.writable) this.#conn.write(pack(goAways, false));
    const left = this.#data;
    this.#control = [];
    this.#pong = undefined;
    this.#data = [];
    this.#dataBytes = 0;
    this.#waiters = [];
    const err = new Error("yamux session closed");
    for (const f of left) f.done?.(err);
  }

  /**
   * Headers and small payloads are copied together into one buffer, and their writers are told at
   * once. Large payloads go out as they are, without a copy; their writers are told once the
   * connection has taken the bytes (its write callback), so nobody reuses a buffer still being read.
   */
  #write(frames: QueuedFrame[]): void {
    const parts: Buffer[] = [];
    const copied: Done[] = [];
    const referenced: Done[] = [];
    let run: QueuedFrame[] = [];
    for (const f of frames) {
      run.push(f);
      if (f.payload && f.payload.length >= ZERO_COPY_MIN) {
        parts.push(pack(run, true), Buffer.from(f.payload.buffer, f.payload.byteOffset, f.payload.length));
        if (f.done) referenced.push(f.done);
        run = [];
      } else if (f.done) copied.push(f.done);
    }
    if (run.length > 0) parts.push(pack(run, false));
    if (parts.length === 1 && referenced.length === 0) {
      this.#send(parts[0]!);
      for (const d of copied) d();
      return;
    }
    const conn = this.#conn;
    if (parts.length > 1) conn.cork();
    let ok = true;
    for (let i = 0; i < parts.length; i++) {
      ok = conn.write(parts[i], i === parts.length - 1 ? callAll(referenced) : undefined);
    }
    if (parts.length > 1) conn.uncork();
    if (!ok) this.#onCongested();
    // Copied payloads are no longer needed: their writers may go on at once.
    for (const d of copied) d();
  }

  /** Nothing queued or held back: a frame may go out at once, as the first frame of its tick. */
  #idle(): boolean {
    return (
      !this.#scheduled &&
      !this.#congested &&
      !this.#closed &&
      this.#corked === 0 &&
      this.#control.length === 0 &&
      this.#data.length === 0
    );
  }

  /**
   * What #schedule, #flush and #write do for the first small frame of a tick, without the queue
   * entry and the arrays they take: an echo's frame, a gRPC message. In bench:tunnel's 64 B echo
   * this path is every frame.
   */
  #writeNow(
    type: FrameType,
    flags: number,
    streamId: number,
    payload: Uint8Array | undefined,
    length: number,
  ): void {
    this.#scheduled = true;
    this.#busyTick = true;
    queueMicrotask(this.#endOfTick);
    const buf = Buffer.allocUnsafe(HEADER_SIZE + length);
    writeHeader(buf, 0, type, flags, streamId, length);
    if (payload) buf.set(payload, HEADER_SIZE);
    this.bytesWritten += buf.length;
    this.#send(buf);
  }

  /** One buffer whose writers have been told already: straight to the socket when nothing waits. */
  #send(buf: Buffer): void {
    if (this.#messages?.sendNow(buf)) return;
    if (!this.#conn.write(buf)) this.#onCongested();
  }

  /**
   * The first frame of a tick goes out at once (latency); frames queued after it in the same tick
   * are gathered by one microtask into one write (fewer, larger messages under load).
   */
  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    if (!this.#congested && !this.#busyTick && this.#corked === 0) {
      this.#busyTick = true;
      this.#flush();
    }
    queueMicrotask(this.#endOfTick);
  }

  readonly #endOfTick = (): void => {
    this.#scheduled = false;
    this.#busyTick = false;
    this.#flush();
  };

  /** The control queue is full: written out if the connection takes bytes, else the peer is not reading. */
  #makeRoom(): boolean {
    if (!this.#congested) {
      this.#flush();
      if (this.#control.length < this.#maxControl) return true;
    }
    this.#onFail(errors.controlQueueFull(this.#maxControl));
    return false;
  }

  #onCongested(): void {
    this.#congested = true;
    if (this.#writeTimeoutMs === 0) return;
    this.#congestedSince = performance.now();
    if (this.#stallTimer === undefined) this.#armStallTimer(this.#writeTimeoutMs);
  }

  #armStallTimer(ms: number): void {
    this.#stallTimer = setTimeout(this.#checkProgress, ms);
    this.#stallTimer.unref();
  }

  /** Fires at most once per timeout period, however often congestion comes and goes meanwhile. */
  readonly #checkProgress = (): void => {
    this.#stallTimer = undefined;
    if (!this.#congested || this.#closed) return;
    const stalled = performance.now() - this.#congestedSince;
    if (stalled >= this.#writeTimeoutMs) this.#onFail(errors.writeTimeout(this.#writeTimeoutMs));
    else this.#armStallTimer(this.#writeTimeoutMs - stalled);
  };

  #flush(): void {
    while (!this.#congested && !this.#closed && (this.#control.length > 0 || this.#data.length > 0)) {
      const frames = this.#control;
      this.#control = [];
      this.#pong = undefined;
      let size = frames.length * HEADER_SIZE;
      let taken = 0;
      while (taken < this.#data.length) {
        const f = this.#data[taken]!;
        const n = HEADER_SIZE + (f.payload?.length ?? 0);
        if (size > 0 && size + n > this.#maxWrite) break;
        frames.push(f);
        size += n;
        this.#dataBytes -= n;
        taken++;
      }
      if (taken > 0) this.#data.splice(0, taken);
      this.bytesWritten += size;
      this.#write(frames);
    }
    if (this.#waiters.length > 0 && this.writable) {
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const fn of waiters) fn();
    }
  }
}

/** Headers and payloads of `frames` in one buffer; with `headerOnlyLast`, the last one's payload is left out. */
function pack(frames: QueuedFrame[], headerOnlyLast: boolean): Buffer {
  const last = frames.length - 1;
  let size = 0;
  for (let i = 0; i <= last; i++) {
    size += HEADER_SIZE + (headerOnlyLast && i === last ? 0 : (frames[i]!.payload?.length ?? 0));
  }
  const buf = Buffer.allocUnsafe(size);
  let off = 0;
  for (let i = 0; i <= last; i++) {
    const f = frames[i]!;
    writeHeader(buf, off, f.type, f.flags, f.streamId, f.length);
    off += HEADER_SIZE;
    if (f.payload && !(headerOnlyLast && i === last)) {
      buf.set(f.payload, off);
      off += f.payload.length;
    }
  }
  return buf;
}

function callAll(dones: Done[]): Done | undefined {
  if (dones.length <= 1) return dones[0];
  return (err) => {
    for (const d of dones) d(err);
  };
}
