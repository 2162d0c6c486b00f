import { type EventLoopUtilization, performance } from "node:perf_hooks";

/** How often waiting handshakes look at the loop, ms; also the shortest window that is measured. */
const CHECK_MS = 5;
/** However busy the loop, one waiter goes through at least this often: arrivals slow down, never stop. */
const MAX_GAP_MS = 50;
/** At most this many go through per look, with the loop idle. */
const BURST = 4;
/** The rate handshakes go through is averaged over about this long, ms. */
const RATE_WINDOW_MS = 1000;
/** Never told to come back later than this, s. */
const MAX_RETRY_AFTER_S = 30;

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
  /** Handshakes let through per ms, averaged over RATE_WINDOW_MS (decayed from #rateAt). */
  #rate = 0;
  #rateAt = performance.now();
  /** Handshakes refused and told when to come back, not yet due (decayed from #promisedAt at the rate). */
  #promised = 0;
  #promisedAt = performance.now();

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
      this.#passed(1);
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

  /**
   * For a handshake refused because too many are in progress while some wait here: when to come
   * back, in whole seconds. Each refusal takes the next place in a queue behind the waiting ones,
   * drained at the rate handshakes have been going through, so agents refused together come back
   * spread over the time it takes, not all in the next second (and then again, each time later).
   */
  retryAfterSeconds(): number {
    const now = performance.now();
    // However busy, one every MAX_GAP_MS goes through: never a slower rate than that.
    const perMs = Math.max(this.#decayedRate(now), 1 / MAX_GAP_MS);
    this.#promised = Math.max(0, this.#promised - (now - this.#promisedAt) * perMs) + 1;
    this.#promisedAt = now;
    const seconds = Math.ceil((this.#waiting.length + this.#promised) / perMs / 1000);
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, seconds));
  }

  #passed(n: number): void {
    const now = performance.now();
    this.#lastPass = now;
    this.#rate = this.#decayedRate(now) + n / RATE_WINDOW_MS;
    this.#rateAt = now;
  }

  #decayedRate(now: number): number {
    return this.#rate * Math.exp(-(now - this.#rateAt) / RATE_WINDOW_MS);
  }

  #arm(): void {
    if (this.#timer !== undefined || this.#waiting.length === 0) return;
    this.#timer = setTimeout(this.#look, CHECK_MS);
    this.#timer.unref(); // each handshake's own deadline keeps the process up while it waits
  }

  readonly #look = (): void => {
    this.#timer = undefined;
    const room = Math.min(this.#room(), this.#waiting.length);
    if (room > 0) this.#passed(room);
    for (let i = 0; i < room; i++) this.#waiting.shift()!();
    this.#arm();
  };
}
