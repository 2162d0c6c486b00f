/**
 * The keepalive ticks of every session with the same interval, on one timer instead of one per
 * session. Members are spread over SLOTS slots; the timer visits one slot every interval / SLOTS,
 * so each member still ticks once per interval (the first time between 15/16 of an interval and
 * one interval after joining), and a kas holding 20,000 tunnels keeps 16 timer wake-ups per interval
 * with some 1,250 ticks each, not 20,000 Timeout objects (about 150 B each with their closure) in
 * Node's timer lists.
 */
const SLOTS = 16;

/** A session's keepalive tick; its identity is the membership. */
export type KeepAliveTick = () => void;

class Wheel {
  readonly #intervalMs: number;
  readonly #slots: Set<KeepAliveTick>[] = Array.from({ length: SLOTS }, () => new Set());
  /** Where each member is, so that leaving is O(1). */
  readonly #slotOf = new Map<KeepAliveTick, number>();
  /** The slot the timer visits next. */
  #cursor = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  get size(): number {
    return this.#slotOf.size;
  }

  join(member: KeepAliveTick): void {
    // The slot just visited is the one visited last from now: a full interval away (less one step).
    const slot = (this.#cursor + SLOTS - 1) % SLOTS;
    this.#slots[slot]!.add(member);
    this.#slotOf.set(member, slot);
    if (this.#timer === undefined) {
      this.#timer = setInterval(this.#turn, this.#intervalMs / SLOTS);
      this.#timer.unref();
    }
  }

  leave(member: KeepAliveTick): void {
    const slot = this.#slotOf.get(member);
    if (slot === undefined) return;
    this.#slotOf.delete(member);
    this.#slots[slot]!.delete(member);
    if (this.#slotOf.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      this.#cursor = 0;
    }
  }

  readonly #turn = (): void => {
    const slot = this.#slots[this.#cursor]!;
    this.#cursor = (this.#cursor + 1) % SLOTS;
    // A tick may end its session (and so leave the wheel) or add others: iterate over a copy.
    for (const member of [...slot]) member();
  };
}

const wheels = new Map<number, Wheel>();

/** Ticks `member` every `intervalMs` until `leaveKeepAlive`. */
export function joinKeepAlive(intervalMs: number, member: KeepAliveTick): void {
  let wheel = wheels.get(intervalMs);
  if (!wheel) {
    wheel = new Wheel(intervalMs);
    wheels.set(intervalMs, wheel);
  }
  wheel.join(member);
}

export function leaveKeepAlive(intervalMs: number, member: KeepAliveTick): void {
  const wheel = wheels.get(intervalMs);
  if (!wheel) return;
  wheel.leave(member);
  if (wheel.size === 0) wheels.delete(intervalMs);
}
