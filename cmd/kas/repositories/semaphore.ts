// A counting semaphore with a FIFO queue: bounds how many git processes run at once, so a burst
// of polls waits its turn instead of forking hundreds of processes.

export class Semaphore {
  #free: number;
  readonly #queue: Array<() => void> = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`semaphore limit must be >= 1: ${limit}`);
    this.#free = limit;
  }

  /** Waiting callers, for tests and metrics. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Runs `fn` once a slot is free (callers are served in arrival order). Rejects with the
   * signal's reason, without running `fn`, if `signal` aborts while waiting.
   */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.#acquire(signal);
    try {
      return await fn();
    } finally {
      this.#release();
    }
  }

  #acquire(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.#queue.indexOf(grant);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(signal!.reason);
      };
      const grant = (): void => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(grant);
    });
  }

  #release(): void {
    // The slot passes straight to the next waiter (the free count does not change).
    const next = this.#queue.shift();
    if (next) next();
    else this.#free++;
  }
}
