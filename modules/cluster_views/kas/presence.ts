// Keeps the views of every agent whose stream is open here alive: one timer for all the streams,
// not one each. The period is cut into slots; each stream falls in one (its owner's hash, a random
// one: its first refresh comes anywhere in the period, so streams opened together, after a replica
// restart, are not refreshed together), and each tick refreshes the streams of the slots come due,
// together (the store sends them in one pipeline rather than a round trip each).

/** An open stream: its agent, and the stream (`owner` in the store). */
export type OpenStream = readonly [agentId: string, owner: string];

export interface PresenceRefresherOptions {
  /** How often each open stream's views are refreshed. */
  periodMs: number;
  /** Refreshes these streams' views (rejects if it could not). */
  refresh: (due: OpenStream[]) => Promise<void>;
  /** A refresh failed after one that did not (told once, not at every tick while it lasts). */
  onFailing?: (err: Error) => void;
}

export class PresenceRefresher {
  readonly #o: PresenceRefresherOptions;
  readonly #tickMs: number;
  /** Per slot of the period: owner -> agent id. */
  readonly #slots: Map<string, string>[];
  /** Ticks done since start: the next slot due is `#ticks % slots`. */
  #ticks = 0;
  #startedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #failing = false;

  constructor(o: PresenceRefresherOptions) {
    this.#o = o;
    // About 100 slots: small slices, not one burst; ticks of 20 ms to 1 s.
    this.#tickMs = Math.max(20, Math.min(1000, o.periodMs / 100));
    const n = Math.max(1, Math.round(o.periodMs / this.#tickMs));
    this.#slots = Array.from({ length: n }, () => new Map<string, string>());
  }

  get size(): number {
    let n = 0;
    for (const slot of this.#slots) n += slot.size;
    return n;
  }

  /** `owner`'s stream for `agentId` is open: refreshed from now on, until `remove`. */
  add(agentId: string, owner: string): void {
    this.#slot(owner).set(owner, agentId);
  }

  remove(owner: string): void {
    this.#slot(owner).delete(owner);
  }

  start(): void {
    if (this.#timer) return;
    this.#startedAt = performance.now();
    this.#ticks = 0;
    this.#timer = setInterval(() => this.#tick(), this.#tickMs);
    this.#timer.unref();
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Refreshes the slots come due since the last tick (more than one when the event loop was late). */
  #tick(): void {
    const upTo = Math.floor((performance.now() - this.#startedAt) / this.#tickMs);
    // Late by more than a period: each slot once.
    this.#ticks = Math.max(this.#ticks, upTo - this.#slots.length);
    const due: OpenStream[] = [];
    for (; this.#ticks < upTo; this.#ticks++)
      for (const [owner, agentId] of this.#slots[this.#ticks % this.#slots.length]!)
        due.push([agentId, owner]);
    if (due.length === 0) return;
    this.#o.refresh(due).then(
      () => {
        this.#failing = false;
      },
      (err: unknown) => {
        if (!this.#failing) this.#o.onFailing?.(err as Error);
        this.#failing = true;
      },
    );
  }

  /** The slot of `owner`: FNV-1a of its characters, so that nothing per stream says where it is. */
  #slot(owner: string): Map<string, string> {
    let h = 0x811c9dc5;
    for (let i = 0; i < owner.length; i++) h = Math.imul(h ^ owner.charCodeAt(i), 0x01000193);
    return this.#slots[(h >>> 0) % this.#slots.length]!;
  }
}
