import { performance } from "node:perf_hooks";

/** A new connection's input is gated for this long after its handshake, ms. */
export const NEW_FOR_MS = 10_000;
/** New connections' input runs for about this long at a time: in a turn's poll phase, then in its check phase, ms. */
export const TURN_BUDGET_MS = 10;

/**
 * Bounds how long new connections' input can hold the event loop in one turn. What a connection
 * says in its first seconds (a tunnel's first streams: an agent's modules opening their calls)
 * sets up much more than it carries, and many agents connecting together say it together: in one
 * poll of the loop, 300 new tunnels' first messages at 2 ms each held every established tunnel's
 * requests for 0.35-0.64 s (bench/tunnel/new-input.ts). The handshake pacer cannot see this work
 * coming: it arrives a round trip after the handshake it let through.
 *
 * Input of connections younger than `newForMs` goes through at once while none waits and the
 * turn's first such delivery began less than `budgetMs` ago; beyond, it waits (its WebSocket
 * paused) and goes on in the turn's check phase for another `budgetMs`, and so on, connections in
 * the order they began to wait, so established connections' input and everything else the loop
 * serves comes in between. Time is taken between deliveries, not around them: what a message sets
 * off on the next tick (a stream's 'data', say) counts, and the one that crosses the budget runs
 * to its end. Each connection's messages keep their order.
 */
export class InboundGate {
  readonly newForMs: number;
  readonly budgetMs: number;
  /** Connections holding messages, in the order they began to wait. */
  readonly #waiting: GatedInput[] = [];
  /** When this turn's first delivery of new connections' input began; undefined: none yet. */
  #turnStart: number | undefined;
  #tick: NodeJS.Immediate | undefined;
  readonly #now: () => number;

  constructor(newForMs = NEW_FOR_MS, budgetMs = TURN_BUDGET_MS, now: () => number = () => performance.now()) {
    this.newForMs = newForMs;
    this.budgetMs = budgetMs;
    this.#now = now;
  }

  /** @internal For GatedInput. */
  now(): number {
    return this.#now();
  }

  /** Connections whose input waits for a later turn. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** A gate for one connection's input, new from now on (its messages' first taker, just after the handshake): `deliver` takes each message. */
  open(deliver: (message: Buffer) => void, pause: () => void, resume: () => void): GatedInput {
    return new GatedInput(this, this.#now() + this.newForMs, deliver, pause, resume);
  }

  /** @internal For GatedInput: runs `deliver(message)` now if this turn has room and nobody waits; false: the caller holds it. */
  tryNow(deliver: (message: Buffer) => void, message: Buffer): boolean {
    if (this.#waiting.length > 0) return false;
    if (this.#turnStart === undefined) {
      this.#turnStart = this.#now();
      this.#schedule();
    } else if (this.#now() - this.#turnStart >= this.budgetMs) return false;
    deliver(message);
    return true;
  }

  /** @internal For GatedInput: it holds messages from now on. */
  wait(input: GatedInput): void {
    this.#waiting.push(input);
    this.#schedule();
  }

  /** @internal For GatedInput: it holds nothing any more. */
  forget(input: GatedInput): void {
    const at = this.#waiting.indexOf(input);
    if (at !== -1) this.#waiting.splice(at, 1);
  }

  #schedule(): void {
    this.#tick ??= setImmediate(() => this.#turn());
  }

  /** The check phase of a turn that delivered or held new connections' input: a fresh budget. */
  #turn(): void {
    this.#tick = undefined;
    this.#turnStart = undefined;
    if (this.#waiting.length === 0) return;
    this.#turnStart = this.#now();
    this.#drain();
  }

  /**
   * One held message, then, once what it set off has run (#afterTicks), the next, while the
   * budget lasts; what is left waits for the next turn.
   */
  readonly #drain = (): void => {
    const input = this.#waiting[0];
    if (input === undefined) {
      this.#turnStart = undefined; // the next turn's poll starts a budget of its own
      return;
    }
    if (this.#now() - this.#turnStart! >= this.budgetMs) {
      this.#schedule();
      return;
    }
    try {
      // A delivery can end its connection, which forgets it: shift only what is still first.
      if (input.deliverOne() && this.#waiting[0] === input) this.#waiting.shift();
    } finally {
      // Even past a delivery that throws: the others still wait on this chain.
      process.nextTick(this.#afterTicks);
    }
  };

  /**
   * The next step goes behind what the delivery queued on both of Node's queues (a stream's
   * 'data' on the tick queue, a promise's continuation on the microtask queue): each runs in order,
   * so its time counts before the next step looks at the budget.
   */
  readonly #afterTicks = (): void => queueMicrotask(this.#drain);
}

/** One connection's side of the gate. */
export class GatedInput {
  readonly #gate: InboundGate;
  readonly #until: number;
  readonly #deliver: (message: Buffer) => void;
  readonly #pause: () => void;
  readonly #resume: () => void;
  readonly #held: Buffer[] = [];
  #settled = false;

  constructor(
    gate: InboundGate,
    until: number,
    deliver: (message: Buffer) => void,
    pause: () => void,
    resume: () => void,
  ) {
    this.#gate = gate;
    this.#until = until;
    this.#deliver = deliver;
    this.#pause = pause;
    this.#resume = resume;
  }

  /** No longer new and holding nothing: its messages go straight through from now on. */
  get settled(): boolean {
    return this.#settled && this.#held.length === 0;
  }

  /** Delivers `message` now or, in order, on a later turn. */
  push(message: Buffer): void {
    if (this.#held.length > 0) {
      this.#held.push(message);
      this.#pause();
      return;
    }
    if (this.#settled || this.#gate.now() >= this.#until) {
      this.#settled = true;
      this.#deliver(message);
      return;
    }
    if (this.#gate.tryNow(this.#deliver, message)) return;
    this.#held.push(message);
    this.#pause();
    this.#gate.wait(this);
  }

  /** Delivers every held message now (the peer's connection ends: what it sent before goes first). */
  flush(): void {
    this.#gate.forget(this);
    for (let m = this.#held.shift(); m !== undefined; m = this.#held.shift()) this.#deliver(m);
  }

  /** Drops what is held (this end destroyed the connection). */
  drop(): void {
    this.#gate.forget(this);
    this.#held.length = 0;
  }

  /** For the gate: delivers the oldest held message; true once none is left (the input flows again). */
  deliverOne(): boolean {
    const message = this.#held.shift();
    if (message !== undefined) this.#deliver(message);
    if (this.#held.length > 0) return false;
    this.#resume();
    return true;
  }
}
