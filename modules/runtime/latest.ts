/**
 * A value that changes over time where only the newest matters (the agent's configuration): a
 * reader busy with one value skips those set meanwhile and next sees the newest. Nothing queues.
 */
export class LatestValue<T> {
  #value: T | undefined;
  #version = 0;
  #wake: Array<() => void> = [];

  /** The newest value, if any was set. */
  get current(): T | undefined {
    return this.#value;
  }

  set(value: T): void {
    this.#value = value;
    this.#version++;
    for (const wake of this.#wake.splice(0)) wake();
  }

  /** The current value (once one is set), then each newer one, until `signal` aborts. */
  async *watch(signal: AbortSignal): AsyncGenerator<T, void, undefined> {
    let seen = 0;
    while (!signal.aborted) {
      if (this.#version !== seen) {
        seen = this.#version;
        yield this.#value as T;
        continue;
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          resolve();
        };
        this.#wake.push(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }
}
