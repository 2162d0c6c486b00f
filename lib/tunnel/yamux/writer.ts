import type { Duplex } from "node:stream";
import { type FrameType, HEADER_SIZE, writeHeader } from "./frame.ts";

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

/**
 * Output side of a session. Control frames go first, so pings and window updates never wait
 * behind bulk data. Frames queued in one tick go out together (see #schedule and #write). The
 * writer of a payload is told (`done`) once the connection has taken it, which also holds
 * producers back while the connection is congested. Data queues up to `highWater` bytes before
 * writers are asked to wait (`waitWritable`); control frames are small and always accepted.
 */
export class FrameWriter {
  readonly #conn: Duplex;
  readonly #maxWrite: number;
  readonly #highWater: number;
  #control: QueuedFrame[] = [];
  #data: QueuedFrame[] = [];
  #dataBytes = 0;
  #scheduled = false;
  #busyTick = false;
  #congested = false;
  #closed = false;
  #waiters: Array<() => void> = [];
  bytesWritten = 0;

  constructor(conn: Duplex, maxWrite: number, highWater: number) {
    this.#conn = conn;
    this.#maxWrite = maxWrite;
    this.#highWater = highWater;
    conn.on("drain", () => {
      this.#congested = false;
      this.#flush();
    });
  }

  get writable(): boolean {
    return !this.#closed && this.#dataBytes < this.#highWater;
  }

  /** A frame without payload that jumps the queue (window update, ping, GoAway, SYN, ACK, RST). */
  control(type: FrameType, flags: number, streamId: number, length: number): void {
    if (this.#closed) return;
    this.#control.push({ type, flags, streamId, payload: undefined, length, done: undefined });
    this.#schedule();
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
    this.#data.push({ type, flags, streamId, payload, length, done });
    this.#dataBytes += HEADER_SIZE + length;
    this.#schedule();
  }

  /** Calls `fn` once the data queue has room again. */
  waitWritable(fn: () => void): void {
    this.#waiters.push(fn);
  }

  /** Writes what can be written now, then refuses more; frames left behind are failed. */
  close(): void {
    if (this.#closed) return;
    this.#flush();
    this.#closed = true;
    const left = this.#data;
    this.#control = [];
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
    const conn = this.#conn;
    if (parts.length > 1) conn.cork();
    let ok = true;
    for (let i = 0; i < parts.length; i++) {
      ok = conn.write(parts[i], i === parts.length - 1 ? callAll(referenced) : undefined);
    }
    if (parts.length > 1) conn.uncork();
    if (!ok) this.#congested = true;
    // Copied payloads are no longer needed: their writers may go on at once.
    for (const d of copied) d();
  }

  /**
   * The first frame of a tick goes out at once (latency); frames queued after it in the same tick
   * are gathered by one microtask into one write (fewer, larger messages under load).
   */
  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    if (!this.#congested && !this.#busyTick) {
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

  #flush(): void {
    while (!this.#congested && !this.#closed && (this.#control.length > 0 || this.#data.length > 0)) {
      const frames = this.#control;
      this.#control = [];
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
