// Aborting a long-lived object's async work when it ends, without holding an AbortController
// (with its signal's EventTarget: ~0.75 KiB) for all the time it sits idle: a controller exists
// only while some work holds a signal, and goes once the last one is released.

export class WorkAbort {
  #controller: AbortController | undefined;
  #holders = 0;
  #aborted = false;
  #reason: unknown;

  /** A signal for one piece of work, aborted when `abort` is called; `release` it once that work is done. */
  acquire(): AbortSignal {
    this.#holders++;
    if (this.#aborted) return AbortSignal.abort(this.#reason);
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }

  release(): void {
    this.#holders--;
    if (this.#holders === 0) this.#controller = undefined;
  }

  /** Aborts the signals held now, and every one acquired from now on. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  /** What `abort` was given. */
  get reason(): unknown {
    return this.#reason;
  }
}
