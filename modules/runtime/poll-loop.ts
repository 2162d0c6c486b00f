// Polling one thing (a repository's ref) for modules that watch Git: never two polls at once (one
// asked for meanwhile runs right after), the next one a period later, sooner after failures
// (1 s, 2 s, 4 s … up to the period, with jitter) so a change made while the backend was away
// arrives soon after it is back.

export interface PollLoopOptions {
  periodMs: number;
  /** For tests: the jitter's source. */
  random?: () => number;
  /** A poll that threw (a bug: polls report failure by returning false). */
  onError?: (err: unknown) => void;
}

export class PollLoop {
  readonly #poll: () => Promise<boolean>;
  readonly #o: PollLoopOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #failures = 0;
  #stopped = false;

  /** `poll` resolves true when it reached what it polls, false when it failed. */
  constructor(poll: () => Promise<boolean>, options: PollLoopOptions) {
    this.#poll = poll;
    this.#o = options;
  }

  /** Polls in a row that failed. */
  get failures(): number {
    return this.#failures;
  }

  /** A poll is under way. */
  get running(): boolean {
    return this.#running !== undefined;
  }

  /** Polls now, or right after the poll under way; resolves when that poll is done. */
  now(): Promise<void> {
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    clearTimeout(this.#timer);
    this.#running = (async () => {
      do {
        this.#again = false;
        const ok = await this.#poll().catch((err: unknown) => {
          this.#o.onError?.(err);
          return false;
        });
        this.#failures = ok ? 0 : this.#failures + 1;
      } while (this.#again && !this.#stopped);
    })().finally(() => {
      this.#running = undefined;
      this.in(this.#nextIn());
    });
    return this.#running;
  }

  /** The next poll in `ms`, instead of the one scheduled. */
  in(ms: number): void {
    clearTimeout(this.#timer);
    if (!this.#stopped) this.#timer = setTimeout(() => void this.now(), ms);
  }

  /** No more polls (one under way finishes). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #nextIn(): number {
    const { periodMs } = this.#o;
    if (this.#failures === 0) return periodMs;
    const backoff = 1000 * 2 ** Math.min(this.#failures - 1, 16);
    return Math.min(periodMs, backoff * (0.75 + (this.#o.random ?? Math.random)() * 0.5));
  }
}
