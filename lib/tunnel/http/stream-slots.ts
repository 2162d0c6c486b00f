/** One admitted stream: its holder reports idle/busy and gives it back when the stream closes. */
export interface StreamSlot {
  /** How to close the stream when a waiter needs its slot while it sits idle. */
  onEvict(evict: () => void): void;
  idle(): void;
  busy(): void;
  release(): void;
}

interface Waiter {
  resolve(slot: StreamSlot): void;
  reject(err: unknown): void;
  signal: AbortSignal;
  onAbort(): void;
}

/**
 * Caps the streams one dispatcher holds open over a tunnel, across all origins. When the cap
 * is reached, a new stream waits for one to close; if some stream is only idling in a keep-alive
 * pool, the longest-idle one is closed for it, so one origin's idle connections cannot starve
 * another origin until their keep-alive timeout.
 */
export class StreamSlots {
  readonly max: number;
  #used = 0;
  /** Insertion-ordered, so the first entry is the one idle the longest. */
  readonly #idle = new Set<Held>();
  readonly #waiters: Waiter[] = [];
  /** Evictions started but not yet released; each waiter needs at most one. */
  #evicting = 0;

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1)
      throw new RangeError(`maxStreams must be a positive integer, got ${max}`);
    this.max = max;
  }

  /** Streams currently admitted (open or opening). */
  get used(): number {
    return this.#used;
  }

  acquire(signal: AbortSignal): Promise<StreamSlot> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#used < this.max) {
      this.#used++;
      return Promise.resolve(new Held(this));
    }
    return new Promise<StreamSlot>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
          reject(signal.reason);
        },
      };
      signal.addEventListener("abort", waiter.onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#evictIdle();
    });
  }

  /** @internal */
  markIdle(held: Held, idle: boolean): void {
    if (!idle) {
      this.#idle.delete(held);
      return;
    }
    this.#idle.add(held);
    this.#evictIdle();
  }

  /** @internal */
  release(held: Held): void {
    this.#idle.delete(held);
    if (held.evicting) this.#evicting--;
    const waiter = this.#waiters.shift();
    if (waiter === undefined) {
      this.#used--;
      return;
    }
    waiter.signal.removeEventListener("abort", waiter.onAbort);
    waiter.resolve(new Held(this));
  }

  #evictIdle(): void {
    while (this.#evicting < this.#waiters.length) {
      const victim = this.#idle.values().next().value;
      if (victim === undefined) return;
      this.#idle.delete(victim);
      this.#evicting++;
      victim.evict();
    }
  }
}

class Held implements StreamSlot {
  readonly #slots: StreamSlots;
  #released = false;
  #evict: (() => void) | undefined;
  evicting = false;

  constructor(slots: StreamSlots) {
    this.#slots = slots;
  }

  onEvict(evict: () => void): void {
    this.#evict = evict;
  }

  idle(): void {
    if (!this.#released && this.#evict !== undefined) this.#slots.markIdle(this, true);
  }

  busy(): void {
    if (!this.#released) this.#slots.markIdle(this, false);
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#slots.release(this);
  }

  evict(): void {
    this.evicting = true;
    this.#evict?.();
  }
}
