/**
 * A value that is re-obtained at most every `ttlMs` (on the first `get` after that), so the
 * work of obtaining it is off the per-request path. Concurrent callers share one refresh. A
 * failed refresh keeps serving the last good value (the failure goes to `onError`) and is
 * retried after another `ttlMs`: a token file caught mid-rewrite must not fail requests that
 * the previous token still serves. Only with no good value yet does `get` reject.
 */
export class Refreshing<T> {
  readonly #load: () => Promise<T>;
  readonly #ttlMs: number;
  readonly #onError: (error: unknown) => void;
  #value: { value: T } | undefined;
  #expiresAt = 0;
  #pending: Promise<T> | undefined;

  constructor(load: () => Promise<T>, ttlMs: number, onError: (error: unknown) => void) {
    this.#load = load;
    this.#ttlMs = ttlMs;
    this.#onError = onError;
  }

  get(): Promise<T> {
    if (this.#value && Date.now() < this.#expiresAt) return Promise.resolve(this.#value.value);
    this.#pending ??= this.#refresh().finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  async #refresh(): Promise<T> {
    try {
      const value = await this.#load();
      this.#value = { value };
    } catch (err) {
      if (!this.#value) throw err;
      this.#onError(err);
    }
    this.#expiresAt = Date.now() + this.#ttlMs;
    return this.#value.value;
  }
}
