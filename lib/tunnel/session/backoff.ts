export interface BackoffOptions {
  /** First delay. Default 1 s. */
  initialMs?: number;
  /** Delays never exceed this. Default 20 s. */
  maxMs?: number;
  /** Each delay is the previous one times this. Default 1.6. */
  factor?: number;
  /** Each delay is moved randomly by up to this fraction either way. Default 0.2. */
  jitter?: number;
}

/**
 * `ms` moved randomly by up to `fraction` of itself either way, so that many peers given the same
 * delay (clients cut off together, tunnels opened together) do not all act at the same moment.
 */
export function jittered(ms: number, fraction: number, random: () => number = Math.random): number {
  return ms + ms * fraction * (2 * random() - 1);
}

/** Exponential backoff with jitter, so that many clients cut off at once do not return at once. */
export class Backoff {
  readonly #initial: number;
  readonly #max: number;
  readonly #factor: number;
  readonly #jitter: number;
  readonly #random: () => number;
  #current = 0;
  attempt = 0;

  constructor(opts: BackoffOptions = {}, random: () => number = Math.random) {
    this.#initial = opts.initialMs ?? 1000;
    this.#max = opts.maxMs ?? 20_000;
    this.#factor = opts.factor ?? 1.6;
    this.#jitter = opts.jitter ?? 0.2;
    this.#random = random;
    if (!(this.#initial > 0 && this.#max >= this.#initial))
      throw new RangeError("backoff: need 0 < initialMs <= maxMs");
    if (!(this.#factor >= 1)) throw new RangeError("backoff: factor must be >= 1");
    if (!(this.#jitter >= 0 && this.#jitter < 1)) throw new RangeError("backoff: jitter must be in [0, 1)");
  }

  /** The delay `next()` would step to, before jitter. */
  get upcoming(): number {
    return this.#current === 0 ? this.#initial : Math.min(this.#current * this.#factor, this.#max);
  }

  /** The delay before the next attempt. */
  next(): number {
    this.attempt++;
    this.#current = this.upcoming;
    const delay = jittered(this.#current, this.#jitter, this.#random);
    return Math.round(Math.min(this.#max, Math.max(0, delay)));
  }

  reset(): void {
    this.#current = 0;
    this.attempt = 0;
  }
}
