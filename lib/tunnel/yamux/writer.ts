import type { Duplex } from "node:stream";

/**
 * Output side of a session. Frames queued in the same tick go out as one write (one WebSocket
 * message), control frames first, so pings and window updates never wait behind bulk data.
 * While the connection is congested, data queues up to `highWater` bytes and writers are then
 * asked to wait (`waitWritable`); control frames are small and always accepted.
 */
export class FrameWriter {
  readonly #conn: Duplex;
  readonly #maxWrite: number;
  readonly #highWater: number;
  #control: Buffer[] = [];
  #data: Buffer[] = [];
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

  control(frame: Buffer): void {
    if (this.#closed) return;
    this.#control.push(frame);
    this.#schedule();
  }

  data(frame: Buffer): void {
    if (this.#closed) return;
    this.#data.push(frame);
    this.#dataBytes += frame.length;
    this.#schedule();
  }

  /** Calls `fn` once the data queue has room again. */
  waitWritable(fn: () => void): void {
    this.#waiters.push(fn);
  }

  /** Writes what is queued now, then refuses more. */
  close(): void {
    if (this.#closed) return;
    this.#flush();
    this.#closed = true;
    this.#control = [];
    this.#data = [];
    this.#dataBytes = 0;
    this.#waiters = [];
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
      const parts = this.#control;
      let size = 0;
      for (const p of parts) size += p.length;
      this.#control = [];
      let taken = 0;
      while (
        taken < this.#data.length &&
        (size === 0 || size + this.#data[taken]!.length <= this.#maxWrite)
      ) {
        const frame = this.#data[taken++]!;
        parts.push(frame);
        size += frame.length;
        this.#dataBytes -= frame.length;
      }
      if (taken > 0) this.#data.splice(0, taken);
      this.bytesWritten += size;
      const out = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
      if (!this.#conn.write(out)) this.#congested = true;
    }
    if (this.#waiters.length > 0 && this.writable) {
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const fn of waiters) fn();
    }
  }
}
