import { type EventLoopUtilization, performance } from "node:perf_hooks";

/** How often waiting handshakes look at the loop, ms; also the shortest window that is measured. */
const CHECK_MS = 5;
/** However busy the loop, one waiter goes through at least this often: arrivals slow down, never stop. */
const MAX_GAP_MS = 50;
/** At most this many go through per look, with the loop idle. */
const BURST = 4;
/** The rate handshakes go through is averaged over about this long, ms. */
const RATE_WINDOW_MS = 1000;
/** The rate the loop let waiters through while it held some back is averaged over about this much of such time, ms. */
const CAPACITY_WINDOW_MS = 3000;
/** Less time than this held back, ms, and that rate is not yet trusted. */
const CAPACITY_MIN_MS = 50;
/** Held-back time gathered before it counts (or less, when the queue empties), ms. */
const CAPACITY_CHUNK_MS = 250;
/**
 * Places are given out this much faster than the rate the loop was measured to take waiters at.
 * The mistakes cost unequally: a place too
 * early costs the agent a wait in the queue here or one more refusal (a 503 before authentication),
 * a place too late leaves the loop idle while agents wait out their Retry-After. And the rate
 * remembered is often a heavier mix than a herd's (agents' first connections fetch and parse
 * their configuration; a herd's find it cached).
 */
const PLACES_AHEAD_OF_RATE = 1.5;
/** Never told to come back later than this, s. */
const MAX_RETRY_AFTER_S = 30;
/** Client addresses (IPv6: /64 prefixes) whose places are kept apart; beyond, new ones share one. */
export const MAX_PLACE_ADDRESSES = 10_000;
/** The key the addresses beyond MAX_PLACE_ADDRESSES, and refusals without an address, share. */
const SHARED = "";
/** How often, at most, places that have come due are looked for among all the addresses, ms. */
const SWEEP_MS = 1000;

/** An address's places in the queue of refused handshakes. */
interface Places {
  /** Places held when last refused (its last one included); they come due evenly until `due`. */
  held: number;
  at: number;
  /** When its last place comes due (performance.now() ms), at most MAX_RETRY_AFTER_S after `at`. */
  due: number;
}

/**
 * Paces authenticated handshakes by the event loop's load. A handshake's set-up (the upgrade
 * reply, the session, what `onConnection` starts, the first messages of what the peer then opens)
 * runs on the loop that serves the tunnels already open: arrivals in bulk, a replica's worth of
 * agents reconnecting at once, would keep those tunnels' requests waiting behind them. A waiter goes
 * through while the loop was busy less than `maxUtilization` of the time since the last look (up
 * to 4 at a look when it was idle), and at least one every 50 ms however busy it is. A lone
 * arrival on a quiet loop goes through at once.
 */
export class HandshakePacer {
  readonly #max: number;
  readonly #waiting: Array<() => void> = [];
  #since: EventLoopUtilization = performance.eventLoopUtilization();
  #lastPass = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;
  /** Handshakes let through per ms, averaged over RATE_WINDOW_MS (decayed from #rateAt). */
  #rate = 0;
  #rateAt = performance.now();
  /**
   * What the loop can take: waiters let through, and ms, in the looks that found the queue
   * waiting and left some of it waiting (decayed by such time only, so a quiet spell keeps it).
   */
  #heldPassed = 0;
  #heldMs = 0;
  /** Held-back looks not yet counted: waiters let through, ms, and ms of them the loop was busy. */
  readonly #chunk = { passed: 0, ms: 0, busyMs: 0 };
  /** When the last look was, if it left some waiting (the next look's interval was held back throughout). */
  #heldLookAt: number | undefined;
  /** The loop's load over the last window measured. */
  #utilization = 0;
  /** Handshakes refused and told when to come back, not yet due (decayed from #promisedAt at the rate). */
  #promised = 0;
  #promisedAt = performance.now();
  /** Per client address, its places not yet due; empty until a handshake is refused. */
  readonly #places = new Map<string, Places>();
  /** When the last place of all comes due: from then on the map can be emptied at once. */
  #lastDue = Number.NEGATIVE_INFINITY;
  #sweptAt = Number.NEGATIVE_INFINITY;

  constructor(maxUtilization: number) {
    if (!(maxUtilization > 0 && maxUtilization <= 1))
      throw new RangeError(`maxLoopUtilization must be in (0, 1], got ${maxUtilization}`);
    this.#max = maxUtilization;
  }

  /** Handshakes waiting for room. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Whether refusals can be given places: some handshakes held back now, or a rate measured
   * before. Without either (say, authentication is slow, not the loop) a place would be made up.
   */
  get canSchedule(): boolean {
    return this.#waiting.length > 0 || this.capacityPerMs !== undefined;
  }

  /** Client addresses (IPv6: /64 prefixes) holding places not yet due (some may have come due within the last second). */
  get addresses(): number {
    return this.#places.size;
  }

  /** Resolves when this handshake may go on; rejects with the signal's reason if it aborts first. */
  pass(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#places.size !== 0 && performance.now() >= this.#lastDue) this.#places.clear();
    if (this.#waiting.length === 0 && this.#room() > 0) {
      this.#passed(1);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const at = this.#waiting.indexOf(go);
        if (at !== -1) this.#waiting.splice(at, 1);
        reject(signal.reason);
      };
      const go = () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(go);
      this.#arm();
    });
  }

  /** How many may go through now, from the loop's load since the last look (which this starts anew). */
  #room(): number {
    const now = performance.eventLoopUtilization();
    const window = performance.eventLoopUtilization(now, this.#since);
    if (window.idle + window.active < CHECK_MS) return 0; // too short a window to tell
    this.#since = now;
    this.#utilization = window.utilization;
    if (window.utilization < this.#max)
      return Math.max(1, Math.floor(BURST * (1 - window.utilization / this.#max)));
    return performance.now() - this.#lastPass >= MAX_GAP_MS ? 1 : 0;
  }

  /**
   * For a handshake refused because too many are in progress (see `canSchedule`): when to come
   * back, in whole seconds, up to 30. Each refusal takes the next place in a queue behind the
   * `inProgress` handshakes (default: those waiting here; the acceptor counts those still being
   * authenticated too, as they will pass here next), drained at the rate the loop has let waiters
   * through while it held some back and was busy (`capacityPerMs`, remembered across quiet spells;
   * until it is known, at least one per 50 ms), or the rate handshakes have been going through if
   * higher, places given out 1.5 times as fast: agents refused together come back spread over the
   * time it takes, not all in the next second (and then again, each time later), nor more slowly
   * than the loop can take them.
   *
   * The queue is shared fairly among client addresses (`remoteAddress`, the peer of the TCP
   * connection as this process sees it; IPv6 by /64 prefix, which one subscriber commonly holds
   * whole): its places are served a round at a time, one of each address holding any. A refusal
   * from an address that holds `n` places not yet due is told the time of its place in round
   * `n + 1`, behind at most `n + 1` places of each other address. Refusals are counted before
   * authentication, so an unauthenticated flood from one address pushes back only its own places:
   * each other address is told at most one more place, not up to the cap. Agents sharing an
   * address (behind a NAT or a proxy) still each take their own place, spread as before. Behind a
   * TCP load balancer or a proxy that hides client addresses every agent comes from the balancer's
   * address: the places fall back to one queue for all, the herd still spread, and a flood through
   * the balancer pushes everyone back, as it did before places were kept by address; to keep addresses apart, the balancer must pass them on to
   * the connection (direct server return, Kubernetes `externalTrafficPolicy: Local`). Not
   * `X-Forwarded-For`: the client writes it, and a flood could name a new address each time; nor
   * the token, unverified here, which a flood can make up as freely.
   *
   * Bounded: an address's places are forgotten once they are all due (looked for at most once a
   * second among all, and the whole map emptied by the first handshake after the last one is due);
   * beyond 10,000 addresses holding places, new ones share one set of places, as behind a balancer.
   * Nothing is kept, and nothing runs, until a handshake is refused.
   */
  retryAfterSeconds(remoteAddress?: string, inProgress: number = this.#waiting.length): number {
    const now = performance.now();
    // The rate the loop can take waiters at, as measured while it held some back; not only the
    // rate they have been going through, which the agents told to come back later set themselves:
    // a herd told to come back at the rate of the last few, each time, would trickle back. Until
    // it is measured: however busy, one every MAX_GAP_MS goes through.
    const rate = Math.max(this.#decayedRate(now), this.capacityPerMs ?? 1 / MAX_GAP_MS);
    const perMs = PLACES_AHEAD_OF_RATE * rate;
    this.#promised = Math.max(0, this.#promised - (now - this.#promisedAt) * perMs) + 1;
    this.#promisedAt = now;
    if (now - this.#sweptAt >= SWEEP_MS) this.#sweep(now);
    let key = addressKey(remoteAddress);
    let mine = this.#placesOf(key, now);
    if (mine === undefined && this.#places.size >= MAX_PLACE_ADDRESSES) {
      key = SHARED;
      mine = this.#placesOf(key, now);
    }
    const held = mine === undefined ? 0 : (mine.held * (mine.due - now)) / (mine.due - mine.at);
    const addresses = this.#places.size + (mine === undefined ? 1 : 0);
    // Round held + 1 of a fair queue: at most held + 1 places of each address ahead, and no more
    // than all the places promised (exact when one address holds them all, as behind a balancer).
    const ahead = Math.min(this.#promised, (held + 1) * addresses);
    const ms = (inProgress + ahead) / perMs;
    const due = now + Math.min(ms, MAX_RETRY_AFTER_S * 1000);
    this.#places.set(key, { held: held + 1, at: now, due });
    if (due > this.#lastDue) this.#lastDue = due;
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(ms / 1000)));
  }

  /** The places `key` holds not yet due; forgotten if all are. */
  #placesOf(key: string, now: number): Places | undefined {
    const places = this.#places.get(key);
    if (places === undefined || places.due > now) return places;
    this.#places.delete(key);
    return undefined;
  }

  /** Forgets the addresses whose places have all come due. */
  #sweep(now: number): void {
    this.#sweptAt = now;
    for (const [key, places] of this.#places) if (places.due <= now) this.#places.delete(key);
  }

  #passed(n: number): void {
    const now = performance.now();
    this.#lastPass = now;
    this.#rate = this.#decayedRate(now) + n / RATE_WINDOW_MS;
    this.#rateAt = now;
  }

  #decayedRate(now: number): number {
    return this.#rate * Math.exp(-(now - this.#rateAt) / RATE_WINDOW_MS);
  }

  #arm(): void {
    if (this.#timer !== undefined || this.#waiting.length === 0) return;
    this.#timer = setTimeout(this.#look, CHECK_MS);
    this.#timer.unref(); // each handshake's own deadline keeps the process up while it waits
  }

  /**
   * Waiters the loop can let through per ms at this pacer's share, measured in the looks that left
   * some waiting, over stretches in which the loop was at least half the share busy; undefined
   * until 50 ms of such looks have been seen.
   */
  get capacityPerMs(): number | undefined {
    return this.#heldMs >= CAPACITY_MIN_MS ? this.#heldPassed / this.#heldMs : undefined;
  }

  /**
   * Counts the held-back looks gathered, if the loop was at least half the share busy over them: on
   * an idle loop the burst cap (BURST a look), not the loop, set how many went, far more than it
   * could keep taking once their set-ups land on it.
   */
  #count(): void {
    const c = this.#chunk;
    if (c.ms > 0 && c.busyMs >= (c.ms * this.#max) / 2) {
      const keep = Math.exp(-c.ms / CAPACITY_WINDOW_MS);
      this.#heldPassed = this.#heldPassed * keep + c.passed;
      this.#heldMs = this.#heldMs * keep + c.ms;
    }
    c.passed = 0;
    c.ms = 0;
    c.busyMs = 0;
  }

  readonly #look = (): void => {
    this.#timer = undefined;
    const now = performance.now();
    const room = Math.min(this.#room(), this.#waiting.length);
    const held = this.#waiting.length > room;
    if (held && this.#heldLookAt !== undefined) {
      // Waiters throughout since the last look, and the loop, not arrivals, set how many went.
      const ms = now - this.#heldLookAt;
      this.#chunk.passed += room;
      this.#chunk.ms += ms;
      this.#chunk.busyMs += ms * this.#utilization;
    }
    if (!held || this.#chunk.ms >= CAPACITY_CHUNK_MS) this.#count();
    this.#heldLookAt = held ? now : undefined;
    if (room > 0) this.#passed(room);
    for (let i = 0; i < room; i++) this.#waiting.shift()!();
    this.#arm();
  };
}

/**
 * The key an address's places are kept under: an IPv4 address (IPv4-mapped IPv6 ones as IPv4) as
 * it is, an IPv6 address by its /64 prefix (a zone index dropped), none: the shared key.
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined || address === "") return SHARED;
  const zone = address.indexOf("%");
  const plain = (zone === -1 ? address : address.slice(0, zone)).toLowerCase();
  if (!plain.includes(":")) return plain;
  if (plain.startsWith("::ffff:") && plain.includes(".")) return plain.slice("::ffff:".length);
  const gap = plain.indexOf("::");
  const head = (gap === -1 ? plain : plain.slice(0, gap)).split(":").filter((g) => g !== "");
  // Fewer than four groups before the gap: the zeros it stands for (and maybe some of the tail) follow.
  const groups = head.slice(0, 4);
  if (groups.length < 4 && gap !== -1) {
    const tail = plain
      .slice(gap + 2)
      .split(":")
      .filter((g) => g !== "");
    // An embedded IPv4 address at the end is two groups.
    const tailGroups = tail.length + (tail.at(-1)?.includes(".") ? 1 : 0);
    const zeros = 8 - head.length - tailGroups;
    while (groups.length < 4 && groups.length < head.length + zeros) groups.push("0");
    for (const g of tail) if (groups.length < 4) groups.push(g);
  }
  return `${groups.map((g) => (g.includes(".") ? g : Number.parseInt(g, 16).toString(16))).join(":")}::/64`;
}
