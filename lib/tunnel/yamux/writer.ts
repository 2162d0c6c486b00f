import type { Duplex } from "node:stream";
import { type FrameType, HEADER_SIZE, writeHeader } from "./frame.ts";

type Done = (err?: Error | null) => void;

interface QueuedFrame {
  type: FrameType;
  flags: number;
  streamId: number;
  /** Payload view for Data frames, not yet copied; otherwise the header's length field. */
  payload: Uint8Array | undefined;
  length: number;
  /** Runs once the payload has been copied out, so the caller may reuse its buffer. */
  done: Done | undefined;
}

/**
 * Output side of a session. Frames queued in the same tick go out as one write (one WebSocket
 * message), control frames first, so pings and window updates never wait behind bulk data.
 * Each payload is copied exactly once, into that write; the writer of a payload is told (`done`)
 * only then, which also holds producers back while the connection is congested. Data queues up
 * to `highWater` bytes before writers are asked to wait (`waitWritable`); control frames are small
 * and always accepted.
 */
export class FrameWriter {
  readonly #conn: Duplex;
  readonly #maxWrite: number;
  readonly #highWater: number;
  #control: QueuedFrame[] = [];
  #data: QueuedFrame[] = [];
  #dataBytes = 0;
  #scheduled = false;
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

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

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
      const out = Buffer.allocUnsafe(size);
      let off = 0;
      for (const f of frames) {
        writeHeader(out, off, f.type, f.flags, f.streamId, f.length);
        off += HEADER_SIZE;
        if (f.payload) {
          out.set(f.payload, off);
          off += f.payload.length;
        }
      }
      this.bytesWritten += size;
      if (!this.#conn.write(out)) this.#congested = true;
      for (const f of frames) f.done?.();
    }
    if (this.#waiters.length > 0 && this.writable) {
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const fn of waiters) fn();
    }
  }
}
