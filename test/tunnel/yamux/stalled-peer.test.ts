import { once } from "node:events";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  encodeHeader,
  Flag,
  FrameType,
  GoAwayCode,
  HEADER_SIZE,
  type Session,
} from "../../../lib/tunnel/yamux/index.ts";
import { until } from "../../support/until.ts";
import { type RawPeer, rawPair, stallPeer } from "./harness.ts";

// A peer that keeps provoking control frames (pings, refused SYNs) but never reads our side of
// the connection must neither grow our memory nor keep the session forever.

/** The session's clocks; I/O, setImmediate (the harness's `until`) and Date stay real. */
const fakeTimers: Parameters<typeof vi.useFakeTimers>[0] = {
  toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"],
};

const cleanup: Array<() => void> = [];
afterEach(() => {
  vi.useRealTimers();
  for (const fn of cleanup.splice(0)) fn();
});

async function stalledPair(opts: Parameters<typeof rawPair>[0]) {
  const pair = await rawPair(opts);
  cleanup.push(() => {
    pair.session.destroy();
    for (const s of pair.sockets) s.destroy();
  });
  await stallPeer(pair.session, pair.peer, pair.sockets[0]);
  return pair;
}

/** The largest control queue seen after each chunk the session read. */
function watchControlQueue(session: Session, conn: NodeJS.EventEmitter): () => number {
  let max = session.stats.queuedControlFrames;
  // Registered after the session's own listener: it sees each chunk once the session handled it.
  conn.on("data", () => {
    max = Math.max(max, session.stats.queuedControlFrames);
  });
  return () => max;
}

const pings = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) => encodeHeader(FrameType.Ping, Flag.SYN, 0, from + i));

/** Sends header-only `frames` in writes of 1000; resolves once the session has read them all. */
async function flood(session: Session, peer: RawPeer, frames: Buffer[]) {
  const target = session.stats.bytesIn + frames.length * HEADER_SIZE;
  for (let i = 0; i < frames.length; i += 1000) peer.send(...frames.slice(i, i + 1000));
  await until(() => session.stats.bytesIn >= target || session.closed, 20_000, "the flood to be read");
}

describe("a peer that sends pings and never reads", () => {
  test("gets one answer, to its newest ping, however many it sends", async () => {
    const { session, peer, sockets } = await stalledPair({});
    const maxQueued = watchControlQueue(session, sockets[0]);
    const n = 100_000;
    await flood(session, peer, pings(1, n));
    expect(maxQueued()).toBe(1);
    expect(session.stats.queuedControlFrames).toBe(1);
    expect(session.closed).toBe(false);

    peer.socket.resume(); // it reads again: the one pending answer goes out
    await peer.next((h) => h.type === FrameType.Ping && h.flags === Flag.ACK && h.length === n, "the pong");
    const answered = peer.frames.filter((f) => f.h.type === FrameType.Ping && f.h.flags === Flag.ACK);
    expect(answered.map((f) => f.h.length)).toEqual([n]);
  });

  test("is closed by the write timeout, keepalive notwithstanding, and told why with GoAway", async () => {
    vi.useFakeTimers(fakeTimers);
    const writeTimeout = 10_000;
    const { session, peer, sockets } = await stalledPair({
      keepAliveIntervalMs: 1_000,
      keepAliveTimeoutMs: 60_000, // so that only the write timeout can end it here
      connectionWriteTimeoutMs: writeTimeout,
    });
    const closed = once(session, "close");
    await flood(session, peer, pings(1, 10_000));
    // Synchronous from here: no I/O can drain the connection in between.
    expect(sockets[0].writableNeedDrain).toBe(true);
    vi.advanceTimersByTime(writeTimeout - 1);
    expect(session.closed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(session.closed).toBe(true);
    expect((await closed)[0]).toMatchObject({ code: "ERR_YAMUX_WRITE_TIMEOUT" });

    peer.socket.resume();
    const goAway = await peer.next((h) => h.type === FrameType.GoAway, "GoAway", 10_000);
    expect(goAway.length).toBe(GoAwayCode.InternalError);
  });
});

describe("a stalled reader", () => {
  test("is closed within the write timeout, not before", async () => {
    vi.useFakeTimers(fakeTimers);
    const { session, sockets } = await stalledPair({ connectionWriteTimeoutMs: 3_000 });
    const closed = once(session, "close");
    expect(sockets[0].writableNeedDrain).toBe(true);
    vi.advanceTimersByTime(2_999);
    expect(session.closed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(session.closed).toBe(true);
    expect((await closed)[0]).toMatchObject({ code: "ERR_YAMUX_WRITE_TIMEOUT" });
  });

  test("with the write timeout off, keepalive still pings a peer that talks but does not read", async () => {
    vi.useFakeTimers(fakeTimers);
    const { session, peer } = await stalledPair({
      keepAliveIntervalMs: 1_000,
      keepAliveTimeoutMs: 2_000,
      connectionWriteTimeoutMs: 0,
    });
    const closed = once(session, "close");
    // Before each keepalive tick the peer has said something: it is alive, but it reads nothing.
    for (let tick = 0; tick < 4 && !session.closed; tick++) {
      await flood(session, peer, pings(tick, 1));
      vi.advanceTimersByTime(1_000);
    }
    expect(session.closed).toBe(true);
    expect((await closed)[0]).toMatchObject({ code: "ETIMEDOUT", message: expect.stringMatching(/ping/) });
  });
});

describe("a peer that floods SYNs beyond the accept backlog", () => {
  const maxControlQueue = 64;
  const syns = (firstId: number, n: number) =>
    Array.from({ length: n }, (_, i) => encodeHeader(FrameType.WindowUpdate, Flag.SYN, firstId + 2 * i, 0));

  test("while it reads, every refused SYN is answered with RST and the queue stays bounded", async () => {
    const { session, peer, sockets } = await rawPair({ client: false, acceptBacklog: 2, maxControlQueue });
    cleanup.push(() => session.destroy());
    const maxQueued = watchControlQueue(session, sockets[0]);
    peer.send(...syns(1, 1000)); // one write: most of it arrives in one chunk
    await peer.next((h) => h.streamId === 1999, "the answer to the last SYN");
    const rsts = peer.frames.filter((f) => f.h.flags === Flag.RST).length;
    expect(rsts).toBe(998);
    expect(maxQueued()).toBeLessThanOrEqual(maxControlQueue);
    expect(session.closed).toBe(false);
  });

  test("while it does not read, the queue stays bounded and the session ends with GoAway", async () => {
    const { session, peer, sockets } = await stalledPair({
      client: false,
      acceptBacklog: 2,
      maxControlQueue,
    });
    const maxQueued = watchControlQueue(session, sockets[0]);
    const closed = once(session, "close");
    await flood(session, peer, syns(1, 10_000));
    expect(maxQueued()).toBeLessThanOrEqual(maxControlQueue);
    expect((await closed)[0]).toMatchObject({ code: "ERR_YAMUX_CONTROL_QUEUE_FULL" });

    peer.socket.resume();
    const goAway = await peer.next((h) => h.type === FrameType.GoAway, "GoAway", 10_000);
    expect(goAway.length).toBe(GoAwayCode.InternalError);
  });
});
