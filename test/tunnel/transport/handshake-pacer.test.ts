import { setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import { afterEach, describe, expect, onTestFinished, test, vi } from "vitest";
import {
  addressKey,
  HandshakePacer,
  MAX_PLACE_ADDRESSES,
} from "../../../lib/tunnel/transport/handshake-pacer.ts";
import { dial, type HandshakeError, RETRY_SCHEDULED_HEADER } from "../../../lib/tunnel/transport/index.ts";
import { until, within } from "../../support/until.ts";
import { dialed, startServer } from "./helpers.ts";

/** Keeps the event loop busy `busyMs` of every `everyMs` (as a replica taking a herd would be). */
function busyLoop(busyMs: number, everyMs: number): { stop(): void } {
  const timer = setInterval(() => {
    const until = performance.now() + busyMs;
    while (performance.now() < until) {
      // busy: the loop serves nothing else meanwhile
    }
  }, everyMs);
  return { stop: () => clearInterval(timer) };
}

let busy: { stop(): void } | undefined;
afterEach(() => busy?.stop());
const never = new AbortController().signal;

describe("HandshakePacer", () => {
  test("a lone handshake on a quiet loop goes through at once", async () => {
    const pacer = new HandshakePacer(0.5);
    await sleep(20); // a quiet stretch the pacer can measure
    let passed = false;
    const pass = pacer.pass(never).then(() => {
      passed = true;
    });
    await Promise.resolve();
    expect(passed).toBe(true);
    expect(pacer.waiting).toBe(0);
    await pass;
  });

  test("while the loop is busier than the limit, one goes through per 50 ms at most", async () => {
    const pacer = new HandshakePacer(0.5);
    busy = busyLoop(19, 20); // about 95 % busy
    await sleep(30);
    const at: number[] = [];
    const passes = Array.from({ length: 4 }, () => pacer.pass(never).then(() => at.push(performance.now())));
    await within(Promise.all(passes), 10_000, "every handshake through");
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(45);
  });

  test("on a quiet loop, waiters go through several at a look, not one per 50 ms", async () => {
    const pacer = new HandshakePacer(0.5);
    await sleep(20);
    // Turns of the event loop: waiters let through at the same look share one.
    let turn = 0;
    const ticker = setInterval(() => turn++, 1);
    try {
      const turns: number[] = [];
      const passes = Array.from({ length: 9 }, () => pacer.pass(never).then(() => turns.push(turn)));
      await within(Promise.all(passes), 10_000, "every handshake through");
      // The first at once, then up to 4 a look: a few looks, not one for each.
      expect(new Set(turns).size).toBeLessThanOrEqual(6);
    } finally {
      clearInterval(ticker);
    }
  });

  test("a waiter whose signal aborts gives up its place with the signal's reason; the others go on", async () => {
    const pacer = new HandshakePacer(0.5);
    busy = busyLoop(19, 20);
    await sleep(30);
    const leave = new AbortController();
    const order: string[] = [];
    const first = pacer.pass(never).then(() => order.push("first"));
    const gone = pacer.pass(leave.signal);
    const last = pacer.pass(never).then(() => order.push("last"));
    leave.abort(new Error("client went away"));
    await expect(gone).rejects.toThrow("client went away");
    await within(Promise.all([first, last]), 10_000, "the others through");
    expect(order).toEqual(["first", "last"]);
    expect(pacer.waiting).toBe(0);
  });

  test("an already aborted signal is refused at once; a limit outside (0, 1] is refused", async () => {
    const pacer = new HandshakePacer(0.5);
    await expect(pacer.pass(AbortSignal.abort(new Error("too late")))).rejects.toThrow("too late");
    expect(pacer.waiting).toBe(0);
    for (const bad of [0, -0.5, 1.5, Number.NaN])
      expect(() => new HandshakePacer(bad)).toThrow(/maxLoopUtilization must be in \(0, 1\]/);
  });
});

describe("HandshakePacer.retryAfterSeconds", () => {
  test("refusals while handshakes wait are told to come back later and later, spread over the drain, capped at 30 s", async () => {
    const pacer = new HandshakePacer(0.5);
    busy = busyLoop(19, 20); // nothing goes through but the one per 50 ms
    await sleep(30);
    const aborts = new AbortController();
    const waiting = Array.from({ length: 80 }, () => pacer.pass(aborts.signal).catch(() => {}));
    // One per 50 ms (20/s), places given out 1.5 times as fast: the 80 waiting take 2.7 s, and the
    // first refused comes back after them.
    const told = Array.from({ length: 1000 }, () => pacer.retryAfterSeconds());
    expect(told[0]).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < told.length; i++) expect(told[i]!).toBeGreaterThanOrEqual(told[i - 1]!);
    expect(new Set(told).size).toBeGreaterThan(10); // spread, not one second for all
    expect(told.at(-1)).toBe(30);
    aborts.abort(new Error("test over"));
    await Promise.all(waiting);
  });

  test("after a quiet spell, refusals are spread 1.5 times as fast as the loop took waiters while it held some back, not at the last seconds' trickle", async () => {
    const pacer = new HandshakePacer(0.5);
    await sleep(20);
    expect(pacer.capacityPerMs).toBeUndefined();
    // A loop about 40 % busy, in small chunks as a replica's would be: one waiter a look goes through.
    busy = busyLoop(2, 5);
    const burst = Array.from({ length: 300 }, () => pacer.pass(never));
    await within(Promise.all(burst), 20_000, "the burst through");
    busy.stop();
    const capacity = pacer.capacityPerMs!;
    expect(capacity * 1000).toBeGreaterThan(50); // per second: above the floor of one per 50 ms
    // Quiet long enough for the rate handshakes went through at (averaged over ~1 s) to fall near
    // the floor: at that rate, 1,500 refusals behind 40 waiting would be told 30 s, the cap.
    await sleep(3000);
    // Nor does a burst on the idle loop (4 a look, more than the loop could keep taking) count.
    const idle = Array.from({ length: 40 }, () => pacer.pass(never));
    await within(Promise.all(idle), 10_000, "the idle burst through");
    expect(pacer.capacityPerMs).toBe(capacity); // kept across the quiet spell, and unmoved
    const aborts = new AbortController();
    setMaxListeners(40, aborts.signal);
    const waiting = Array.from({ length: 40 }, () => pacer.pass(aborts.signal).catch(() => {}));
    const told = Array.from({ length: 1500 }, () => pacer.retryAfterSeconds());
    // 1,540 places at 1.5 times the measured capacity: the last one's second, give or take the
    // few places that came due while they were handed out.
    const last = (places: number) => Math.ceil(places / (1.5 * capacity) / 1000);
    expect(told.at(-1)).toBeLessThanOrEqual(Math.min(30, last(1540)));
    expect(told.at(-1)).toBeGreaterThanOrEqual(Math.min(30, last(1500)));
    aborts.abort(new Error("test over"));
    await Promise.all(waiting);
  });
});

describe("HandshakePacer.retryAfterSeconds by client address", () => {
  /** A pacer with `n` handshakes waiting, none let through while the test runs synchronously. */
  function waitingPacer(n: number): { pacer: HandshakePacer; done(): Promise<unknown> } {
    const pacer = new HandshakePacer(0.5);
    const aborts = new AbortController();
    setMaxListeners(n, aborts.signal);
    const waiting = Array.from({ length: n }, () => pacer.pass(aborts.signal).catch(() => {}));
    return {
      pacer,
      done: () => {
        aborts.abort(new Error("test over"));
        return Promise.all(waiting);
      },
    };
  }

  test("a flood of refusals from one address pushes back its own places only: another address is told the next place", async () => {
    const { pacer, done } = waitingPacer(40);
    const flood = Array.from({ length: 1000 }, () => pacer.retryAfterSeconds("203.0.113.7"));
    // The flood's own places still spread, up to the cap (as agents behind one balancer's address would be).
    expect(new Set(flood).size).toBeGreaterThan(10);
    expect(flood.at(-1)).toBe(30);
    // Another address is told one place past the flood's first, not the flood's last.
    const other = pacer.retryAfterSeconds("198.51.100.1");
    expect(other).toBeLessThanOrEqual(flood[0]! + 1);
    expect(pacer.addresses).toBe(2);
    await done();
  });

  test("refusals from different addresses each take their own place: told later and later, up to the cap", async () => {
    const { pacer, done } = waitingPacer(40);
    const told = Array.from({ length: 1000 }, (_, i) => pacer.retryAfterSeconds(`10.0.${i >> 8}.${i & 255}`));
    for (let i = 1; i < told.length; i++) expect(told[i]!).toBeGreaterThanOrEqual(told[i - 1]!);
    expect(new Set(told).size).toBeGreaterThan(10);
    expect(told.at(-1)).toBe(30);
    expect(pacer.addresses).toBe(1000);
    await done();
  });

  test(`beyond ${MAX_PLACE_ADDRESSES} addresses holding places, new ones share one`, async () => {
    const { pacer, done } = waitingPacer(150); // every place at least 5 s away: none comes due meanwhile
    for (let i = 0; i < MAX_PLACE_ADDRESSES + 50; i++)
      pacer.retryAfterSeconds(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
    expect(pacer.addresses).toBe(MAX_PLACE_ADDRESSES + 1);
    await done();
  });

  test("an address's places are forgotten once due: the first handshake after the last one empties them all", async () => {
    const pacer = new HandshakePacer(0.5);
    // No one waiting, nothing let through yet: each place is a third of a 50 ms turn behind the one before.
    for (const address of ["192.0.2.1", "192.0.2.2", "192.0.2.3"]) pacer.retryAfterSeconds(address);
    expect(pacer.addresses).toBe(3);
    await sleep(200); // past the last place, 100 ms away
    await pacer.pass(never);
    expect(pacer.addresses).toBe(0);
  });

  test("addresses are keyed as IPv4, IPv4-mapped as IPv4, IPv6 by /64 prefix; none share one key", () => {
    expect(addressKey("192.0.2.1")).toBe("192.0.2.1");
    expect(addressKey("::ffff:192.0.2.1")).toBe("192.0.2.1");
    expect(addressKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:DB8:1:2:ffff::9%eth0")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0db8:0001:0002:0:0:0:1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8:1:3::1")).not.toBe(addressKey("2001:db8:1:2::1"));
    expect(addressKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
    expect(addressKey("1::2:3:4:5:6:7")).toBe("1:0:2:3::/64");
    expect(addressKey(undefined)).toBe(addressKey(""));
  });
});

describe("the acceptor with maxLoopUtilization", () => {
  test("handshakes arriving while the loop is busy complete, paced, within their deadline", async () => {
    const accepted: number[] = [];
    const server = await startServer(
      { tls: false },
      { maxLoopUtilization: 0.5, onConnection: () => accepted.push(performance.now()) },
    );
    busy = busyLoop(19, 20);
    await sleep(30);
    const dials = Array.from({ length: 3 }, () => dialed(server.url, server.dialOptions));
    await within(Promise.all(dials), 10_000, "every tunnel up");
    busy.stop();
    expect(accepted).toHaveLength(3);
    accepted.sort((a, b) => a - b);
    // Two of the three waited their turn: the loop was too busy to take them together.
    expect(accepted[2]! - accepted[0]!).toBeGreaterThanOrEqual(90);
  });

  test("beyond maxPendingHandshakes while handshakes wait for room, the 503s say when to come back, spread, by the client's address", async () => {
    const told = vi.spyOn(HandshakePacer.prototype, "retryAfterSeconds");
    onTestFinished(() => told.mockRestore());
    // The 40 waiting take 2 s at one per 50 ms, longer on a loaded machine: deadlines to match.
    const server = await startServer(
      { tls: false },
      { maxLoopUtilization: 0.5, maxPendingHandshakes: 40, handshakeTimeoutMs: 20_000 },
    );
    const dialOptions = { ...server.dialOptions, handshakeTimeoutMs: 20_000 };
    const { acceptor } = server.listener;
    expect(acceptor.handshakeStats).toEqual({
      pending: 0,
      paced: 0,
      refusedScheduled: 0,
      refusedFlat: 0,
      pacedCapacityPerSecond: undefined,
    });
    busy = busyLoop(19, 20);
    await sleep(30);
    // What the handshakes are doing, as kas's metrics read it while the herd is held back.
    let mostPaced = 0;
    const sampler = setInterval(() => {
      mostPaced = Math.max(mostPaced, acceptor.handshakeStats.paced);
    }, 25);
    onTestFinished(() => clearInterval(sampler));
    const outcomes = await within(
      Promise.all(
        Array.from({ length: 120 }, () =>
          dial(server.url, dialOptions).then(
            (connection) => {
              connection.destroy();
              return "up";
            },
            (e: HandshakeError) => e,
          ),
        ),
      ),
      30_000,
      "every dial answered",
    );
    busy.stop();
    const refused = outcomes.filter((o): o is HandshakeError => o !== "up");
    expect(refused.length).toBeGreaterThan(20);
    for (const r of refused) expect(r.status).toBe(503);
    // Told when the queue ahead of them will have gone through: one per 50 ms go through while the
    // loop is this busy (places given out 1.5 times as fast, 30/s), so behind the 40 waiting, 2 s, not 1.
    // All from one address, as agents behind a balancer would be: spread all the same.
    const retryAfter = refused.map((r) => Number(r.headers["retry-after"]));
    expect(Math.max(...retryAfter)).toBeGreaterThanOrEqual(2);
    // Marked as places in the schedule (clients keep to them without growing their backoff).
    for (const r of refused) expect(r.headers[RETRY_SCHEDULED_HEADER]).toBe("1");
    expect(told).toHaveBeenCalled();
    for (const [address] of told.mock.calls) expect(address).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
    // The acceptor's own account of it (kas's handshake metrics).
    clearInterval(sampler);
    const stats = acceptor.handshakeStats;
    expect(mostPaced).toBeGreaterThan(20);
    expect(stats.pending).toBe(0);
    expect(stats.paced).toBe(0);
    expect(stats.refusedScheduled).toBe(refused.length);
    expect(stats.refusedFlat).toBe(0);
    // Measured while it held the waiters back at one per 50 ms or so (20/s; more between the busy turns).
    expect(stats.pacedCapacityPerSecond).toBeGreaterThan(5);
    expect(stats.pacedCapacityPerSecond).toBeLessThan(200);
  });
});

describe("the acceptor with maxLoopUtilization, handshakes still being authenticated", () => {
  test("a refusal at the pending limit gets a place behind them, marked, once the pacer has a rate to go on (a herd's first wave); before it, a flat second", async () => {
    let arrived = 0;
    let release!: () => void;
    const authenticating = new Promise<void>((resolve) => {
      release = resolve;
    });
    const server = await startServer(
      { tls: false },
      {
        maxLoopUtilization: 0.5,
        maxPendingHandshakes: 40,
        authenticate: async () => {
          arrived++;
          await authenticating;
        },
      },
    );
    const held = Array.from({ length: 40 }, () =>
      dial(server.url, server.dialOptions).then((c) => c.destroy()),
    );
    await until(() => arrived === 40, 10_000, "40 handshakes in authentication");
    const { acceptor } = server.listener;
    expect(acceptor.handshakeStats).toMatchObject({ pending: 40, paced: 0 });
    const refused = () =>
      dial(server.url, server.dialOptions).then(
        () => undefined,
        (e: HandshakeError) => e,
      );
    // None held back and no rate measured: nothing to schedule by (authentication may be what is slow).
    const early = await refused();
    expect(early?.status).toBe(503);
    expect(early?.headers["retry-after"]).toBe("1");
    expect(early?.headers[RETRY_SCHEDULED_HEADER]).toBeUndefined();
    // A rate measured before, as a replica that has taken arrivals remembers it: 20/s.
    const capacity = vi.spyOn(HandshakePacer.prototype, "capacityPerMs", "get").mockReturnValue(0.02);
    onTestFinished(() => capacity.mockRestore());
    const placed = await refused();
    release();
    await within(Promise.all(held), 20_000, "the 40 up");
    expect(placed?.status).toBe(503);
    expect(placed?.headers[RETRY_SCHEDULED_HEADER]).toBe("1");
    // Behind the 40 in progress, places 1.5 times as fast as 20/s: 41 / 30 per s, 2 s.
    expect(placed?.headers["retry-after"]).toBe("2");
    expect(acceptor.handshakeStats).toMatchObject({ refusedScheduled: 1, refusedFlat: 1 });
  });
});

describe("addressKey, property", () => {
  // Zero groups often, so that the compressed spellings have their "::" in every position.
  const group = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff }));
  test("keys every spelling of an IPv6 address by its first four groups", () => {
    fc.assert(
      fc.property(
        fc.array(group, { minLength: 8, maxLength: 8 }),
        fc.boolean(),
        fc.boolean(),
        (groups, upper, zone) => {
          // IPv4-mapped addresses are keyed as IPv4 when written dotted (as sockets report them).
          fc.pre(!(groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff));
          const full = groups.map((g) => g.toString(16).padStart(4, "0")).join(":");
          // WHATWG URL serialises IPv6 compressed (the longest run of zero groups as "::").
          const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1);
          const want = `${groups
            .slice(0, 4)
            .map((g) => g.toString(16))
            .join(":")}::/64`;
          for (const spelling of [full, compressed]) {
            let text = upper ? spelling.toUpperCase() : spelling;
            if (zone) text += "%eth0";
            expect(addressKey(text)).toBe(want);
          }
        },
      ),
    );
  });
});
