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
   * reached when one carries varying text; past it, lines of new kinds share one ration (per
   * level), so neither the table nor the output grows without bound.
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

/** What the summary of the shared ration names (see {@link LogLimits.maxKinds}). */
export const OTHER_KINDS = "(lines of kinds past the limit of kinds tracked)";

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
    const now = this.#now();
    let similar = message;
    let key = `${level}\u0000${message}`;
    let found = this.#kinds.get(key);
    if (found === undefined && this.#kinds.size >= this.#maxKinds && !this.#prune(now)) {
      similar = OTHER_KINDS;
      key = `${level}\u0001`;
      found = this.#kinds.get(key);
    }
    const kind = found ?? { windowStart: now, written: 0, suppressed: 0 };
    if (found === undefined) this.#kinds.set(key, kind);
    else if (now - kind.windowStart >= this.#windowMs) {
      // A window over whose timer has not fired yet (a busy event loop): its summary comes first.
      this.#flush(kind, similar);
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
      kind.timer = setTimeout(() => this.#flush(kind, similar), end);
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
