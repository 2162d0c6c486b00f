import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, test } from "vitest";
import { HandshakePacer } from "../../../lib/tunnel/transport/handshake-pacer.ts";
import { dial, type HandshakeError } from "../../../lib/tunnel/transport/index.ts";
import { within } from "../../support/until.ts";
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
    // At no faster than one per 50 ms (20/s), 40 waiting take 2 s: the first refused comes back after them.
    const told = Array.from({ length: 600 }, () => pacer.retryAfterSeconds());
    expect(told[0]).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < told.length; i++) expect(told[i]!).toBeGreaterThanOrEqual(told[i - 1]!);
    expect(new Set(told).size).toBeGreaterThan(10); // spread, not one second for all
    expect(told.at(-1)).toBe(30);
    aborts.abort(new Error("test over"));
    await Promise.all(waiting);
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

  test("beyond maxPendingHandshakes while handshakes wait for room, the 503s say when to come back, spread", async () => {
    const server = await startServer({ tls: false }, { maxLoopUtilization: 0.5, maxPendingHandshakes: 10 });
    busy = busyLoop(19, 20);
    await sleep(30);
    const outcomes = await within(
      Promise.all(
        Array.from({ length: 80 }, () =>
          dial(server.url, server.dialOptions).then(
            (connection) => {
              connection.destroy();
              return "up";
            },
            (e: HandshakeError) => e,
          ),
        ),
      ),
      20_000,
      "every dial answered",
    );
    busy.stop();
    const refused = outcomes.filter((o): o is HandshakeError => o !== "up");
    expect(refused.length).toBeGreaterThan(40);
    for (const r of refused) expect(r.status).toBe(503);
    // Refused together, told later and later: one per 50 ms go through while the loop is this busy,
    // so the twentieth or so in the queue behind the waiting ones is told 2 s, not 1.
    const told = refused.map((r) => Number(r.headers["retry-after"]));
    expect(Math.max(...told)).toBeGreaterThanOrEqual(2);
  });
});
