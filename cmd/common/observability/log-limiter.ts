// Repeated log lines of one kind, rationed: whoever can make kas log a line (a refused token, a
// malformed frame, a client that leaves) can make it log that line a million times, filling disks
// and drowning the lines that matter. Each kind (level and message) may write `burst` lines per
// window; the rest are counted, and one line at the window's end says how many were left out.

export interface LogLimits {
  /** Lines of one kind written per window before the rest are suppressed. Default 20. */
  burst?: number;
  /** Window length in ms. Default 10 000. */
  windowMs?: number;
  /**
   * Kinds tracked at once. Default 1000. Messages are constant templates, so this is only
   * reached when one carries varying text; past it, lines of new kinds pass unrationed rather
   * than letting the table grow without bound.
   */
  maxKinds?: number;
  /** Current time in ms. Default `Date.now`. */
  now?: () => number;
}

/** Writes the summary of a kind's suppressed lines, at the kind's level. */
export type SummaryWriter = (suppressed: number, message: string) => void;

interface Kind {
  windowStart: number;
  written: number;
  suppressed: number;
  /** Set while lines are suppressed: fires at the window's end with the summary. */
  timer?: NodeJS.Timeout;
  summarize?: SummaryWriter;
}

export class LogLimiter {
  readonly #burst: number;
  readonly #windowMs: number;
  readonly #maxKinds: number;
  readonly #now: () => number;
  readonly #kinds = new Map<string, Kind>();

  constructor(limits: LogLimits = {}) {
    this.#burst = limits.burst ?? 20;
    this.#windowMs = limits.windowMs ?? 10_000;
    this.#maxKinds = limits.maxKinds ?? 1000;
    this.#now = limits.now ?? Date.now;
  }

  /**
   * Whether a line of `level` and `message` may be written now. When not, it is counted, and
   * `summarize` (the latest given) writes one line for the count when the window ends.
   */
  admit(level: number, message: string, summarize: SummaryWriter): boolean {
    const key = `${level}\u0000${message}`;
    const now = this.#now();
    let kind = this.#kinds.get(key);
    if (kind === undefined) {
      if (this.#kinds.size >= this.#maxKinds && !this.#prune(now)) return true;
      kind = { windowStart: now, written: 0, suppressed: 0 };
      this.#kinds.set(key, kind);
    } else if (now - kind.windowStart >= this.#windowMs) {
      // A window over whose timer has not fired yet (a busy event loop): its summary comes first.
      this.#flush(kind, message);
      kind.windowStart = now;
      kind.written = 0;
    }
    if (kind.written < this.#burst) {
      kind.written++;
      return true;
    }
    kind.suppressed++;
    kind.summarize = summarize;
    if (kind.timer === undefined) {
      const end = Math.max(0, kind.windowStart + this.#windowMs - now);
      kind.timer = setTimeout(() => this.#flush(kind, message), end);
      // A pending summary must not keep a daemon that is otherwise done alive.
      kind.timer.unref();
    }
    return false;
  }

  #flush(kind: Kind, message: string): void {
    clearTimeout(kind.timer);
    kind.timer = undefined;
    const { suppressed, summarize } = kind;
    kind.suppressed = 0;
    if (suppressed > 0) summarize?.(suppressed, message);
  }

  /** Forgets kinds whose window is over and owe no summary; whether room was made. */
  #prune(now: number): boolean {
    for (const [key, kind] of this.#kinds) {
      if (kind.timer === undefined && now - kind.windowStart >= this.#windowMs) this.#kinds.delete(key);
    }
    return this.#kinds.size < this.#maxKinds;
  }
}
