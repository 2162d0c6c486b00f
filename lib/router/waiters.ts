export interface WaitOptions {
  /** Epoch milliseconds; the wait fails with `onDeadline()` then. */
  deadline: number;
  signal?: AbortSignal | undefined;
}

interface Waiter<T> {
  readonly key: string;
  readonly deadline: number;
  readonly resolve: (value: T) => void;
  readonly reject: (err: unknown) => void;
  readonly onDeadline: () => Error;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
  heapIndex: number;
}

/**
 * Callers waiting, per key, for something to turn up. `notify` wakes a key's waiters oldest
 * first. However many wait, there is one timer: a min-heap by deadline arms it for the earliest.
 */
export class Waiters<T> {
  readonly #byKey = new Map<string, Set<Waiter<T>>>();
  readonly #heap: Waiter<T>[] = [];
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;

  /** Waiters for `key`, or for every key. */
  count(key?: string): number {
    return key === undefined ? this.#heap.length : (this.#byKey.get(key)?.size ?? 0);
  }

  wait(key: string, options: WaitOptions, onDeadline: () => Error): Promise<T> {
    const { deadline, signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (deadline <= Date.now()) return Promise.reject(onDeadline());
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        key,
        deadline,
        resolve,
        reject,
        onDeadline,
        signal,
        onAbort: () => this.#settle(waiter, signal!.reason, false),
        heapIndex: -1,
      };
      const set = this.#byKey.get(key) ?? new Set();
      this.#byKey.set(key, set);
      set.add(waiter);
      signal?.addEventListener("abort", waiter.onAbort, { once: true });
      this.#push(waiter);
      this.#arm();
    });
  }

  /** Resolves every waiter for `key` with `value`, oldest first; returns how many. */
  notify(key: string, value: T): number {
    const set = this.#byKey.get(key);
    if (!set) return 0;
    const woken = [...set];
    for (const w of woken) this.#settle(w, value, true);
    return woken.length;
  }

  /** Resolves every waiter, of every key, with `value`; returns how many. */
  notifyAll(value: T): number {
    let woken = 0;
    for (const key of [...this.#byKey.keys()]) woken += this.notify(key, value);
    return woken;
  }

  /** Fails every waiter (shutdown). */
  rejectAll(err: Error): void {
    for (const w of [...this.#heap]) this.#settle(w, err, false);
  }

  #settle(w: Waiter<T>, outcome: unknown, ok: boolean): void {
    if (w.heapIndex < 0) return;
    this.#remove(w);
    const set = this.#byKey.get(w.key)!;
    set.delete(w);
    if (set.size === 0) this.#byKey.delete(w.key);
    w.signal?.removeEventListener("abort", w.onAbort);
    if (ok) w.resolve(outcome as T);
    else w.reject(outcome);
    this.#arm();
  }

  #expire = (): void => {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const now = Date.now();
    while (this.#heap.length > 0 && this.#heap[0]!.deadline <= now) {
      const w = this.#heap[0]!;
      this.#settle(w, w.onDeadline(), false);
    }
    this.#arm();
  };

  /** Keeps the single timer pointed at the earliest deadline. */
  #arm(): void {
    const next = this.#heap[0]?.deadline ?? Number.POSITIVE_INFINITY;
    if (next === this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = next;
    if (next === Number.POSITIVE_INFINITY) return;
    // setTimeout cannot wait longer than 2^31-1 ms; an earlier wake-up simply re-arms.
    this.#timer = setTimeout(this.#expire, Math.min(Math.max(0, next - Date.now()), 0x7fffffff));
  }

  // Binary min-heap on deadline; each waiter knows its index so removal is O(log n).
  #push(w: Waiter<T>): void {
    w.heapIndex = this.#heap.length;
    this.#heap.push(w);
    this.#up(w.heapIndex);
  }

  #remove(w: Waiter<T>): void {
    const i = w.heapIndex;
    const last = this.#heap.pop()!;
    w.heapIndex = -1;
    if (last === w) return;
    this.#heap[i] = last;
    last.heapIndex = i;
    this.#down(i);
    this.#up(last.heapIndex);
  }

  #up(i: number): void {
    const h = this.#heap;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.deadline <= h[i]!.deadline) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    const h = this.#heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let min = i;
      if (l < h.length && h[l]!.deadline < h[min]!.deadline) min = l;
      if (r < h.length && h[r]!.deadline < h[min]!.deadline) min = r;
      if (min === i) return;
      this.#swap(i, min);
      i = min;
    }
  }

  #swap(a: number, b: number): void {
    const h = this.#heap;
    const wa = h[a]!;
    const wb = h[b]!;
    h[a] = wb;
    h[b] = wa;
    wa.heapIndex = b;
    wb.heapIndex = a;
  }
}
