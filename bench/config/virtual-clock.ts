// A virtual clock for one process: replaces setTimeout / setInterval (global and
// node:timers/promises) and Date with versions that follow a clock only `advance()` moves, so a
// simulation can cover several 300 s poll periods in a couple of minutes. Everything in the process
// that keeps time through these (ConfigurationWatches' poll timers, the rate limiters'
// windows and waits, grpc-js deadlines) sees the same virtual time; I/O runs in real time, and the
// driver lets it finish before moving the clock on (so I/O takes no virtual time).
// Install it before anything else runs: only for a process of its own (bench/config/steady.ts).
import { createRequire, syncBuiltinESMExports } from "node:module";

interface Timer {
  at: number;
  seq: number;
  fn: (...args: unknown[]) => void;
  args: unknown[];
  interval: number | undefined;
  cancelled: boolean;
}

const RealDate = Date;
export const real = {
  setTimeout: globalThis.setTimeout,
  clearTimeout: globalThis.clearTimeout,
  setImmediate: globalThis.setImmediate,
  now: Date.now,
  /** The monotonic clock, in ms, whatever `install` did to `performance.now`. */
  monotonic: performance.now.bind(performance),
};

/** A handle with the methods Node's Timeout has (ref/unref/refresh/hasRef, a numeric primitive). */
class VirtualTimeout {
  constructor(readonly timer: Timer) {}
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
  hasRef(): boolean {
    return false;
  }
  refresh(): this {
    return this;
  }
  close(): void {
    this.timer.cancelled = true;
  }
  [Symbol.toPrimitive](): number {
    return this.timer.seq;
  }
}

export class VirtualClock {
  #now: number;
  #seq = 0;
  /** Pending timers, kept sorted by (at, seq) lazily: sorted before each run. */
  #timers: Timer[] = [];
  #dirty = false;
  readonly #bySeq = new Map<number, Timer>();

  constructor(start: number) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  get pending(): number {
    return this.#timers.length;
  }

  #add(fn: (...args: unknown[]) => void, ms: number | undefined, args: unknown[], interval: boolean) {
    const delay = Math.max(0, Math.floor(Number(ms) || 0));
    const timer: Timer = {
      at: this.#now + delay,
      seq: ++this.#seq,
      fn,
      args,
      interval: interval ? Math.max(1, delay) : undefined,
      cancelled: false,
    };
    this.#timers.push(timer);
    this.#bySeq.set(timer.seq, timer);
    this.#dirty = true;
    return new VirtualTimeout(timer);
  }

  #clear(handle: unknown): void {
    if (handle instanceof VirtualTimeout) handle.timer.cancelled = true;
    else if (typeof handle === "number") {
      const t = this.#bySeq.get(handle);
      if (t) t.cancelled = true;
    }
  }

  /** The earliest timer due at or before `until`, removed from the list; undefined if none. */
  #nextDue(until: number): Timer | undefined {
    if (this.#dirty) {
      this.#timers = this.#timers.filter((t) => !t.cancelled);
      this.#timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      this.#dirty = false;
    }
    while (this.#timers.length > 0) {
      const t = this.#timers[0]!;
      if (t.cancelled) {
        this.#timers.shift();
        this.#bySeq.delete(t.seq);
        continue;
      }
      if (t.at > until) return undefined;
      this.#timers.shift();
      this.#bySeq.delete(t.seq);
      return t;
    }
    return undefined;
  }

  /**
   * Moves the clock to `until`, running each timer due on the way at its own time, letting the
   * event loop turn (real setImmediate) after each so what it started gets going.
   */
  async advanceTo(until: number): Promise<number> {
    let fired = 0;
    for (;;) {
      const t = this.#nextDue(until);
      if (!t) break;
      this.#now = Math.max(this.#now, t.at);
      if (t.interval !== undefined) {
        t.at = this.#now + t.interval;
        this.#timers.push(t);
        this.#bySeq.set(t.seq, t);
        this.#dirty = true;
      }
      fired++;
      t.fn(...t.args);
      await new Promise((r) => real.setImmediate(r));
    }
    this.#now = Math.max(this.#now, until);
    return fired;
  }

  /** Replaces the process's timers, Date and performance.now with this clock's. */
  install(): void {
    const clock = this;
    const g = globalThis as unknown as Record<string, unknown>;
    g.setTimeout = (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
      clock.#add(fn, ms, args, false);
    g.setInterval = (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
      clock.#add(fn, ms, args, true);
    g.clearTimeout = (h: unknown) => clock.#clear(h);
    g.clearInterval = (h: unknown) => clock.#clear(h);
    class VirtualDate extends RealDate {
      constructor(...args: unknown[]) {
        if (args.length === 0) super(clock.#now);
        else super(...(args as [string]));
      }
      static override now(): number {
        return clock.#now;
      }
    }
    g.Date = VirtualDate;
    // The in-process rate limits measure refills on the monotonic clock.
    Object.defineProperty(performance, "now", {
      value: () => clock.#now,
      configurable: true,
      writable: true,
    });
    // node:timers and node:timers/promises (imported by name, e.g. the FIFO rate-limit waits):
    // change the CommonJS exports, then push them to the ESM bindings.
    const require = createRequire(import.meta.url);
    const timers = require("node:timers") as Record<string, unknown>;
    for (const k of ["setTimeout", "setInterval", "clearTimeout", "clearInterval"]) timers[k] = g[k];
    const promises = require("node:timers/promises") as Record<string, unknown>;
    promises.setTimeout = <T>(ms?: number, value?: T, options?: { signal?: AbortSignal }) =>
      new Promise<T>((resolve, reject) => {
        const signal = options?.signal;
        if (signal?.aborted) {
          reject(abortError(signal));
          return;
        }
        const onAbort = () => {
          handle.close();
          reject(abortError(signal!));
        };
        const handle = clock.#add(
          () => {
            signal?.removeEventListener("abort", onAbort);
            resolve(value as T);
          },
          ms,
          [],
          false,
        );
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    syncBuiltinESMExports();
  }
}

function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error("The operation was aborted", { cause: signal.reason }), {
    name: "AbortError",
    code: "ABORT_ERR",
  });
}
