// The session's output queue on a connection the test paces by hand: a real Duplex whose writes
// complete only when the test says so, so congestion starts and ends exactly where it asserts.
import { Duplex } from "node:stream";
import { afterEach, describe, expect, test, vi } from "vitest";
import { FrameDecoder, type FrameHeader, FrameType, HEADER_SIZE } from "../../../lib/tunnel/yamux/index.ts";
import { FrameWriter } from "../../../lib/tunnel/yamux/writer.ts";

/**
 * A connection whose writes complete only when the test says so (release(), or open() for good);
 * `highWaterMark` bytes pending make it congested.
 */
class PacedConn extends Duplex {
  /** The buffers handed to write(), one entry per call (a corked batch leaves as one writev). */
  readonly calls: Buffer[] = [];
  /** How many of those calls came while the connection was corked (a batch leaving as one writev). */
  corkedCalls = 0;
  #pending: Array<() => void> = [];
  #paced: boolean;
  constructor(highWaterMark: number, paced = true) {
    super({ writableHighWaterMark: highWaterMark, read() {} });
    this.#paced = paced;
  }
  override write(chunk: Buffer, ...rest: unknown[]): boolean {
    this.calls.push(Buffer.from(chunk));
    if (this.writableCorked > 0) this.corkedCalls++;
    return (super.write as (...a: unknown[]) => boolean)(chunk, ...rest);
  }
  override _write(_chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    if (this.#paced) this.#pending.push(cb);
    else cb();
  }
  /** Completes the writes so far: the connection drains. */
  release(): void {
    for (const cb of this.#pending.splice(0)) cb();
  }
  /** From now on writes complete at once. */
  open(): void {
    this.#paced = false;
    this.release();
  }
  /** The frames written so far, header and payload text. */
  frames(): Array<{ h: FrameHeader; payload?: string }> {
    const out: Array<{ h: FrameHeader; payload?: string }> = [];
    if (this.calls.some((b) => b.length === 0)) throw new Error("an empty write reached the connection");
    const d = new FrameDecoder(1 << 30, (h, p) => out.push(p ? { h, payload: p.toString() } : { h }));
    d.push(Buffer.concat(this.calls));
    return out;
  }
}

const limits = { maxWrite: 1 << 20, highWater: 1 << 20, maxControl: 16, writeTimeoutMs: 0 };
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

function writer(conn: PacedConn, overrides: Partial<typeof limits> = {}) {
  const failures: Error[] = [];
  const w = new FrameWriter(conn, { ...limits, ...overrides }, (err) => failures.push(err));
  return { w, failures };
}

/** A writer whose connection is congested: a first write is pending and over the high-water mark. */
async function congested(overrides: Partial<typeof limits> = {}) {
  const conn = new PacedConn(1);
  const { w, failures } = writer(conn, overrides);
  w.ordered(FrameType.Data, 0, 1, Buffer.from("first"));
  await tick();
  expect(w.congested).toBe(true);
  return { conn, w, failures };
}

afterEach(() => vi.useRealTimers());

describe("order and batching", () => {
  test("the first frame of a tick leaves at once; the rest of the tick leaves together, control first", async () => {
    const conn = new PacedConn(1 << 20, false);
    const { w } = writer(conn);
    w.ordered(FrameType.Data, 0, 1, Buffer.from("a"));
    expect(conn.calls).toHaveLength(1);
    w.ordered(FrameType.Data, 0, 1, Buffer.from("b"));
    w.control(FrameType.WindowUpdate, 0, 1, 7);
    expect(conn.calls).toHaveLength(1);
    await tick();
    expect(conn.calls).toHaveLength(2);
    const f = conn.frames();
    expect(f.map((x) => [x.h.type, x.payload ?? x.h.length])).toEqual([
      [FrameType.Data, "a"],
      [FrameType.WindowUpdate, 7],
      [FrameType.Data, "b"],
    ]);
    expect(w.bytesWritten).toBe(3 * HEADER_SIZE + 2);
  });

  test("a control frame alone goes out in the same tick", () => {
    const conn = new PacedConn(1 << 20, false);
    const { w } = writer(conn);
    w.control(FrameType.Ping, 1, 0, 5);
    expect(conn.frames().map((x) => x.h.length)).toEqual([5]);
  });

  test("queued frames are written in pieces of at most maxWrite bytes", async () => {
    const { conn, w } = await congested({ maxWrite: 2 * (HEADER_SIZE + 10) });
    for (let i = 0; i < 5; i++) w.ordered(FrameType.Data, 0, 1, Buffer.alloc(10, 48 + i));
    conn.open();
    await tick();
    const sizes = conn.calls.slice(1).map((b) => b.length);
    expect(sizes).toEqual([2 * (HEADER_SIZE + 10), 2 * (HEADER_SIZE + 10), HEADER_SIZE + 10]);
    expect(conn.frames().map((x) => x.payload)).toEqual([
      "first",
      ...[0, 1, 2, 3, 4].map((i) => String(i).repeat(10)),
    ]);
  });

  test("cork holds frames until the last uncork, then they leave in one write", async () => {
    const conn = new PacedConn(1 << 20, false);
    const { w } = writer(conn);
    w.cork();
    w.cork();
    w.ordered(FrameType.Data, 0, 1, Buffer.from("x"));
    w.ordered(FrameType.Data, 0, 1, Buffer.from("y"));
    w.uncork();
    expect(conn.calls).toHaveLength(0);
    w.uncork();
    expect(conn.calls).toHaveLength(1);
    expect(conn.frames().map((x) => x.payload)).toEqual(["x", "y"]);
  });
});

describe("payload ownership", () => {
  test("small payloads are copied and released at once; large ones only once the connection took them", async () => {
    const { conn, w } = await congested();
    const done: string[] = [];
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(16 * 1024 - 1, 97), () => done.push("small"));
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(16 * 1024, 98), () => done.push("large"));
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(20 * 1024, 99), () => done.push("large 2"));
    expect(done).toEqual([]);
    conn.release(); // drains: the queue is written
    await tick();
    expect(done).toEqual(["small"]);
    conn.open();
    await tick();
    expect(done).toEqual(["small", "large", "large 2"]);
    expect(conn.corkedCalls).toBe(4); // header runs and payloads by reference, in one writev
    expect(conn.frames().map((x) => x.payload?.length)).toEqual([5, 16 * 1024 - 1, 16 * 1024, 20 * 1024]);
  });

  test("after close, queued payloads and new ones are failed", async () => {
    const { w } = await congested();
    const errs: Array<Error | null | undefined> = [];
    w.ordered(FrameType.Data, 0, 1, Buffer.from("queued"), (e) => errs.push(e));
    w.close();
    w.ordered(FrameType.Data, 0, 1, Buffer.from("late"), (e) => errs.push(e));
    expect(errs.map((e) => e?.message)).toEqual(["yamux session closed", "yamux session closed"]);
    expect(w.writable).toBe(false);
  });
});

describe("congestion", () => {
  test("data waits beyond the high-water mark; waiters run once it drains below", async () => {
    const { conn, w } = await congested({ highWater: 2 * (HEADER_SIZE + 10) });
    let woken = 0;
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(10));
    expect(w.writable).toBe(true);
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(10));
    expect(w.writable).toBe(false); // exactly at the mark
    w.waitWritable(() => woken++);
    await tick();
    expect(woken).toBe(0);
    conn.release();
    await tick();
    expect(woken).toBe(1);
    expect(w.writable).toBe(true);
    w.waitWritable(() => woken++);
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(10)); // a later flush runs the new waiter only
    await tick();
    expect(woken).toBe(2);
  });

  test("while congested only the newest answer to a ping waits; once drained each is sent", async () => {
    const { conn, w } = await congested();
    w.pong(1);
    w.pong(2);
    w.pong(3);
    expect(w.controlQueued).toBe(1);
    conn.open();
    await tick();
    w.pong(4);
    w.pong(5);
    await tick();
    const pongs = conn.frames().filter((x) => x.h.type === FrameType.Ping);
    expect(pongs.map((x) => x.h.length)).toEqual([3, 4, 5]);
  });

  test("control frames beyond the bound while congested fail the writer; GoAway is always taken", async () => {
    const { conn, w, failures } = await congested({ maxControl: 3 });
    for (let i = 0; i < 3; i++) w.control(FrameType.WindowUpdate, 0, 1, i);
    expect(failures).toEqual([]);
    w.control(FrameType.WindowUpdate, 0, 1, 3);
    expect(failures.map((e) => (e as { code?: string }).code)).toEqual(["ERR_YAMUX_CONTROL_QUEUE_FULL"]);
    expect(w.controlQueued).toBe(3);
    w.control(FrameType.GoAway, 0, 0, 2);
    expect(w.controlQueued).toBe(4);
    // Closing writes the GoAway past congestion, and nothing else that was queued.
    w.close();
    const goAway = conn.frames().filter((x) => x.h.type !== FrameType.Data);
    expect(goAway.map((x) => [x.h.type, x.h.length])).toEqual([[FrameType.GoAway, 2]]);
    w.control(FrameType.GoAway, 0, 0, 1); // closed: taken no more
    expect(w.controlQueued).toBe(0);
    expect(conn.frames()).toHaveLength(2);
  });

  test("a full control queue on a connection that takes bytes is written out, not failed", async () => {
    const conn = new PacedConn(1 << 20, false);
    const { w, failures } = writer(conn, { maxControl: 2 });
    for (let i = 0; i < 10; i++) w.control(FrameType.WindowUpdate, 0, 1, i);
    await tick();
    expect(failures).toEqual([]);
    expect(conn.frames().map((x) => x.h.length)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  test("the write timeout counts from when congestion began, through drains that make no lasting progress", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    const { conn, w, failures } = await congested({ writeTimeoutMs: 1000 });
    vi.advanceTimersByTime(600);
    conn.release(); // progress: congestion ends ...
    await Promise.resolve();
    w.ordered(FrameType.Data, 0, 1, Buffer.from("more")); // ... and begins again at 600 ms
    expect(w.congested).toBe(true);
    vi.advanceTimersByTime(400); // the first timer: only 400 ms of this congestion
    expect(failures).toEqual([]);
    vi.advanceTimersByTime(599);
    expect(failures).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(failures.map((e) => e.message)).toEqual(["connection made no write progress for 1000 ms"]);
  });

  test("a connection that drains in time is not failed", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    const { conn, failures } = await congested({ writeTimeoutMs: 1000 });
    vi.advanceTimersByTime(999);
    conn.release();
    vi.advanceTimersByTime(5000);
    expect(failures).toEqual([]);
  });
});

describe("more edges", () => {
  test("a frame of 16 KiB written when idle is still taken by reference; one byte less is copied", async () => {
    const conn = new PacedConn(1 << 30);
    const { w } = writer(conn);
    const done: string[] = [];
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(16 * 1024 - 1), () => done.push("copied"));
    await tick();
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(16 * 1024), () => done.push("referenced"));
    await tick();
    expect(done).toEqual(["copied"]);
    conn.open();
    await tick();
    expect(done).toEqual(["copied", "referenced"]);
    // The connection took it without asking to wait: the writer is not congested, the next frame goes.
    expect(w.congested).toBe(false);
    w.ordered(FrameType.Data, 0, 1, Buffer.from("after"));
    await tick();
    expect(conn.frames().map((x) => x.payload?.length)).toEqual([16 * 1024 - 1, 16 * 1024, 5]);
  });

  test("while congested, even a lone small frame waits for the drain", async () => {
    const { conn, w } = await congested();
    const before = conn.calls.length;
    w.ordered(FrameType.Data, 0, 1, Buffer.from("later"));
    await tick();
    expect(conn.calls.length).toBe(before);
    conn.open();
    await tick();
    expect(conn.frames().map((x) => x.payload)).toEqual(["first", "later"]);
  });

  test("a frame larger than maxWrite still goes out, whole", async () => {
    const { conn, w } = await congested({ maxWrite: 20 });
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(100, 120));
    conn.open();
    await tick();
    expect(conn.frames().map((x) => x.payload?.length)).toEqual([5, 100]);
  });

  test("with the write timeout at 0, congestion never fails the writer", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    const { failures } = await congested({ writeTimeoutMs: 0 });
    vi.advanceTimersByTime(24 * 3600_000);
    expect(failures).toEqual([]);
  });

  test("a closed writer takes no control frame, not even into its queue", async () => {
    const conn = new PacedConn(1 << 20, false);
    const { w } = writer(conn);
    w.close();
    w.control(FrameType.WindowUpdate, 0, 1, 1);
    w.pong(3);
    expect(w.controlQueued).toBe(0);
    await tick();
    expect(conn.calls).toEqual([]);
  });

  test("a message path that takes a frame keeps it off the Duplex; one that declines leaves it there", async () => {
    const conn = new PacedConn(1 << 20, false);
    const sent: Buffer[] = [];
    let take = true;
    const w = new FrameWriter(conn, limits, () => {}, {
      receive: () => {},
      sendNow: (m) => {
        if (take) sent.push(Buffer.from(m));
        return take;
      },
    });
    w.ordered(FrameType.Data, 0, 1, Buffer.from("fast"));
    await tick();
    take = false;
    w.ordered(FrameType.Data, 0, 1, Buffer.from("slow"));
    await tick();
    expect(sent.map((b) => b.subarray(HEADER_SIZE).toString())).toEqual(["fast"]);
    expect(conn.frames().map((x) => x.payload)).toEqual(["slow"]);
  });
});

describe("ticks, corks and frames without payload", () => {
  test("frames after the first of a tick wait for its end, even through cork and uncork", async () => {
    for (const first of ["data", "control"] as const) {
      const conn = new PacedConn(1 << 20, false);
      const { w } = writer(conn);
      if (first === "data") w.ordered(FrameType.Data, 0, 1, Buffer.from("a"));
      else w.control(FrameType.WindowUpdate, 0, 1, 1);
      w.cork();
      w.ordered(FrameType.Data, 0, 1, Buffer.from("b"));
      w.ordered(FrameType.Data, 0, 1, Buffer.from("c"));
      w.uncork();
      expect(conn.calls, first).toHaveLength(1);
      await tick();
      expect(conn.calls, first).toHaveLength(2);
      // A new tick: its first frame leaves at once again.
      w.control(FrameType.WindowUpdate, 0, 1, 2);
      expect(conn.calls, first).toHaveLength(3);
    }
  });

  test("an uncork that wrote this tick's frames makes the next uncork of the tick wait for its end", async () => {
    const conn = new PacedConn(1 << 20, false);
    const { w } = writer(conn);
    w.cork();
    w.ordered(FrameType.Data, 0, 1, Buffer.from("a"));
    w.uncork();
    expect(conn.calls).toHaveLength(1);
    w.cork();
    w.ordered(FrameType.Data, 0, 1, Buffer.from("b"));
    w.uncork();
    expect(conn.calls).toHaveLength(1);
    await tick();
    expect(conn.frames().map((x) => x.payload)).toEqual(["a", "b"]);
    expect(conn.calls).toHaveLength(2);
  });

  test("FIN frames (no payload) go out idle, queued, flushed and failed alike", async () => {
    const conn = new PacedConn(1 << 20, false);
    const { w } = writer(conn);
    w.ordered(FrameType.WindowUpdate, 4, 1, undefined); // idle: the fast path
    w.ordered(FrameType.WindowUpdate, 4, 3, undefined); // queued behind it
    await tick();
    expect(conn.frames().map((x) => [x.h.streamId, x.h.flags])).toEqual([
      [1, 4],
      [3, 4],
    ]);
    const c = await congested();
    c.w.ordered(FrameType.WindowUpdate, 4, 5, undefined);
    c.w.close(); // failed without a callback to tell
    c.w.ordered(FrameType.WindowUpdate, 4, 7, undefined);
    expect(c.conn.frames().map((x) => x.h.streamId)).toEqual([1]);
  });

  test("large payloads without callbacks (a stream's frames before its last) go by reference too", async () => {
    const { conn, w } = await congested();
    const done: string[] = [];
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(20 * 1024, 65));
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(20 * 1024, 66));
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(20 * 1024, 67), () => done.push("last"));
    conn.open();
    await tick();
    expect(done).toEqual(["last"]);
    expect(conn.frames().map((x) => x.payload?.[0])).toEqual(["f", "A", "B", "C"]);
  });

  test("a batch the connection does not take at once congests the writer: the next frame waits", async () => {
    const conn = new PacedConn(1000);
    const { w } = writer(conn);
    w.ordered(FrameType.Data, 0, 1, Buffer.from("a")); // 13 bytes: below the mark
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(20 * 1024)); // this tick's batch takes it past the mark
    await tick();
    expect(w.congested).toBe(true);
    const before = conn.calls.length;
    w.ordered(FrameType.Data, 0, 1, Buffer.from("z"));
    await tick();
    expect(conn.calls).toHaveLength(before);
    conn.open();
    await tick();
    expect(conn.frames().map((x) => x.payload?.length)).toEqual([1, 20 * 1024, 1]);
  });

  test("a batch of large payloads none of which has a callback is written whole", async () => {
    const { conn, w } = await congested();
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(20 * 1024, 65));
    w.ordered(FrameType.Data, 0, 1, Buffer.alloc(20 * 1024, 66));
    conn.open();
    await tick();
    expect(conn.frames().map((x) => x.payload?.[0])).toEqual(["f", "A", "B"]);
  });

  test("with a message path, a tick's batch goes through it too", async () => {
    const conn = new PacedConn(1 << 20, false);
    const sent: Buffer[] = [];
    const w = new FrameWriter(conn, limits, () => {}, {
      receive: () => {},
      sendNow: (m) => sent.push(Buffer.from(m)) > 0,
    });
    w.ordered(FrameType.Data, 0, 1, Buffer.from("a"));
    w.ordered(FrameType.Data, 0, 1, Buffer.from("b"));
    w.control(FrameType.WindowUpdate, 0, 1, 1);
    await tick();
    expect(sent).toHaveLength(2);
    expect(conn.calls).toEqual([]);
  });
});
