// Waiting for a rate limiter's token, first come first served per key. Only the head of a key's
// line asks the limiter again, after the limiter's own `msBeforeNext` (plus a little jitter, so
// replicas' heads do not hit Redis in the same millisecond): no polling, and no herd of waiters
// retrying at each window boundary. rate-limiter-flexible's RateLimiterQueue does FIFO too, but
// cannot drop a waiter whose caller gave up (it would still take a token) and keeps every key's
// queue forever.
import { setTimeout as sleep } from "node:timers/promises";
import { RateLimiterRes } from "rate-limiter-flexible";
import type { PointLimiter } from "./rate-limits.ts";

// Floor for a wait, against a limiter answering 0 ms over and over.
const MIN_WAIT_MS = 5;

interface Waiter {
  wake(): void;
  /** The limiter's store failed for the head: every waiter behind it gets the error at once. */
  fail(err: unknown): void;
}

export class FifoLimiter {
  readonly #lines = new Map<string, Waiter[]>();

  constructor(readonly limiter: PointLimiter) {}

  /** Keys with callers waiting. */
  get waitingKeys(): number {
    return this.#lines.size;
  }

  /**
   * Resolves once a token for `key` is taken; `onWait` is called first if the call has to wait.
   * Rejects if the signal aborts while waiting (the token is then not taken), or with the
   * limiter's store error.
   */
  async take(key: string, signal?: AbortSignal, onWait?: () => void): Promise<void> {
    signal?.throwIfAborted();
    let wait: number | undefined;
    // Nobody waiting: try straight away (callers proceed in parallel while tokens last).
    if (!this.#lines.has(key)) {
      wait = await this.#try(key);
      if (wait === undefined) return;
    }
    onWait?.();
    await this.#inLine(key, wait, signal);
  }

  async #inLine(key: string, firstWait: number | undefined, signal?: AbortSignal): Promise<void> {
    let line = this.#lines.get(key);
    if (!line) {
      line = [];
      this.#lines.set(key, line);
    }
    let wake!: () => void;
    let fail!: (err: unknown) => void;
    const turn = new Promise<void>((resolve, reject) => {
      wake = resolve;
      fail = reject;
    });
    turn.catch(() => {}); // observed below; a waiter that gave up meanwhile must not leave it unhandled
    const me: Waiter = { wake, fail };
    line.push(me);
    // A caller at the head already knows how long to wait; one woken by its predecessor tries at once.
    let wait = line[0] === me ? firstWait : undefined;
    if (line[0] === me) wake();
    try {
      await untilAborted(turn, signal);
      for (;;) {
        if (wait !== undefined)
          await sleep(wait + Math.random() * Math.min(50, wait / 10), undefined, { signal });
        try {
          wait = await this.#try(key);
        } catch (err) {
          // A store that fails (Redis down or hanging) fails the whole line at once, rather than
          // each waiter in turn paying the store's timeout.
          for (const other of line.splice(0)) if (other !== me) other.fail(err);
          throw err;
        }
        if (wait === undefined) return;
      }
    } finally {
      const wasHead = line[0] === me;
      const i = line.indexOf(me);
      if (i >= 0) line.splice(i, 1);
      if (line.length === 0) {
        if (this.#lines.get(key) === line) this.#lines.delete(key);
      } else if (wasHead) {
        line[0]!.wake();
      }
    }
  }

  /** Undefined when a token was taken, else the ms until the limiter may allow one. */
  async #try(key: string): Promise<number | undefined> {
    try {
      await this.limiter.consume(key);
      return undefined;
    } catch (err) {
      if (err instanceof RateLimiterRes) return Math.max(MIN_WAIT_MS, err.msBeforeNext);
      throw err;
    }
  }
}

/** `promise`, or a rejection with the signal's reason once it aborts. */
function untilAborted(promise: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
