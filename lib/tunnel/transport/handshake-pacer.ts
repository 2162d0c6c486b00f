import { type EventLoopUtilization, performance } from "node:perf_hooks";

/** How often waiting handshakes look at the loop, ms; also the shortest window that is measured. */
const CHECK_MS = 5;
/** However busy the loop, one waiter goes through at least this often: arrivals slow down, never stop. */
const MAX_GAP_MS = 50;
/** At most this many go through per look, with the loop idle. */
const BURST = 4;

/**
 * Paces authenticated handshakes by the event loop's load. A handshake's set-up (the upgrade
 * reply, the session, what `onConnection` starts, the first messages of what the peer then opens)
 * runs on the loop that serves the tunnels already open: arrivals in bulk, a replica's worth of
 * agents reconnecting at once, would keep those tunnels' requests waiting behind them. A waiter goes
 * through while the loop was busy less than `maxUtilization` of the time since the last look (up
 * to 4 at a look when it was idle), and at least one every 50 ms however busy it is. A lone
 * arrival on a quiet loop goes through at once.
 */
export class HandshakePacer {
  readonly #max: number;
  readonly #waiting: Array<() => void> = [];
  #since: EventLoopUtilization = performance.eventLoopUtilization();
  #lastPass = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;

  constructor(maxUtilization: number) {
    if (!(maxUtilization > 0 && maxUtilization <= 1))
      throw new RangeError(`maxLoopUtilization must be in (0, 1], got ${maxUtilization}`);
    this.#max = maxUtilization;
  }

  /** Handshakes waiting for room. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves when this handshake may go on; rejects with the signal's reason if it aborts first. */
  pass(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#waiting.length === 0 && this.#room() > 0) {
      this.#lastPass = performance.now();
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const at = this.#waiting.indexOf(go);
        if (at !== -1) this.#waiting.splice(at, 1);
        reject(signal.reason);
      };
      const go = () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(go);
      this.#arm();
    });
  }

  /** How many may go through now, from the loop's load since the last look (which this starts anew). */
  #room(): number {
    const now = performance.eventLoopUtilization();
    const window = performance.eventLoopUtilization(now, this.#since);
    if (window.idle + window.active < CHECK_MS) return 0; // too short a window to tell
    this.#since = now;
    if (window.utilization < this.#max)
      return Math.max(1, Math.floor(BURST * (1 - window.utilization / this.#max)));
    return performance.now() - this.#lastPass >= MAX_GAP_MS ? 1 : 0;
  }

  #arm(): void {
    if (this.#timer !== undefined || this.#waiting.length === 0) return;
    this.#timer = setTimeout(this.#look, CHECK_MS);
    this.#timer.unref(); // each handshake's own deadline keeps the process up while it waits
  }

  readonly #look = (): void => {
    this.#timer = undefined;
    const room = Math.min(this.#room(), this.#waiting.length);
    if (room > 0) this.#lastPass = performance.now();
    for (let i = 0; i < room; i++) this.#waiting.shift()!();
    this.#arm();
  };
}
