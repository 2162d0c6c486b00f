// A stream's rules at their edges, against a raw peer: frame splitting, the write callbacks, the
// credit threshold, FIN and RST in every order, streams the peer opens, and the open and close
// timers.
import { Duplex } from "node:stream";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  Flag,
  FrameDecoder,
  FrameType,
  INITIAL_WINDOW,
  Session,
  YamuxStream,
} from "../../../lib/tunnel/yamux/index.ts";
import { FrameWriter } from "../../../lib/tunnel/yamux/writer.ts";
import { until } from "../../support/until.ts";
import { rawPair } from "./harness.ts";

type Raw = Awaited<ReturnType<typeof rawPair>>;
const HALF_WINDOW = INITIAL_WINDOW / 2;

/** A stream we opened, acknowledged by the raw peer with `window` extra send window. */
async function opened(raw: Raw, window = 0): Promise<YamuxStream> {
  const s = await raw.session.open();
  await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.SYN) !== 0, "SYN");
  raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, window));
  return s;
}

const dataOf = (raw: Raw, id: number) =>
  raw.peer.frames.filter((f) => f.h.type === FrameType.Data && f.h.streamId === id);
const bytesOf = (raw: Raw, id: number) => dataOf(raw, id).reduce((n, f) => n + f.h.length, 0);
const updatesOf = (raw: Raw, id: number) =>
  raw.peer.frames.filter((f) => f.h.type === FrameType.WindowUpdate && f.h.streamId === id && f.h.length > 0);

/** The stream's next write callback, as a promise of its error (or null). */
const written = (s: YamuxStream, chunk: Buffer | string) =>
  new Promise<Error | null | undefined>((resolve) => s.write(chunk, resolve));

// A broken rule should fail its test well before the suite's minute: a mutation run (MUTATION.md)
// would otherwise count it a timeout and restart its worker.
vi.setConfig({ testTimeout: 8_000 });

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("sending", () => {
  test("writes are cut at the frame size and the send window, and resume on credit", async () => {
    const raw = await rawPair({ maxFrameSize: 4096 });
    const s = await opened(raw);
    const done = written(s, Buffer.alloc(INITIAL_WINDOW + 1500, 3));
    await until(() => bytesOf(raw, s.id) === INITIAL_WINDOW, 5000, "one window");
    expect(Math.max(...dataOf(raw, s.id).map((f) => f.h.length))).toBe(4096);
    expect(s.bytesSent).toBe(INITIAL_WINDOW);
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, 0, s.id, 1200));
    await until(() => bytesOf(raw, s.id) === INITIAL_WINDOW + 1200, 5000, "the credit's worth");
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, 0, s.id, 0)); // no credit: nothing moves
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, 0, s.id, 300));
    expect(await done).toBeFalsy();
    await until(() => bytesOf(raw, s.id) === INITIAL_WINDOW + 1500, 5000, "the rest");
    expect(s.bytesSent).toBe(INITIAL_WINDOW + 1500);
    const payload = Buffer.concat(dataOf(raw, s.id).map((f) => f.payload!));
    expect(payload.equals(Buffer.alloc(INITIAL_WINDOW + 1500, 3))).toBe(true);
    raw.session.destroy();
  });

  test("an empty write completes without a frame", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    expect(await written(s, Buffer.alloc(0))).toBeFalsy();
    s.write("after");
    await until(() => dataOf(raw, s.id).length > 0, 5000, "the next write");
    expect(dataOf(raw, s.id).map((f) => f.payload!.toString())).toEqual(["after"]);
    raw.session.destroy();
  });

  test("a writev batch of up to 16 KiB is one frame; a larger one keeps its chunks", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    s.cork();
    s.write(Buffer.alloc(8 * 1024, 1));
    s.write(Buffer.alloc(8 * 1024, 2));
    s.uncork();
    await until(() => bytesOf(raw, s.id) === 16 * 1024, 5000, "the small batch");
    expect(dataOf(raw, s.id).map((f) => f.h.length)).toEqual([16 * 1024]);
    s.cork();
    s.write(Buffer.alloc(8 * 1024, 1));
    s.write(Buffer.alloc(8 * 1024 + 1, 2));
    s.write(Buffer.alloc(0));
    const done = new Promise<unknown>((resolve) => s.write(Buffer.alloc(0), resolve));
    s.uncork();
    expect(await done).toBeFalsy();
    await until(() => bytesOf(raw, s.id) === 32 * 1024 + 1, 5000, "the large batch");
    expect(dataOf(raw, s.id).map((f) => f.h.length)).toEqual([16 * 1024, 8 * 1024, 8 * 1024 + 1]);
    raw.session.destroy();
  });

  test("a chunk's last frame carries what is left of it", async () => {
    const raw = await rawPair({ maxFrameSize: 4096 });
    const s = await opened(raw);
    expect(await written(s, Buffer.alloc(5000, 4))).toBeFalsy();
    await until(() => bytesOf(raw, s.id) === 5000, 5000, "the chunk");
    expect(dataOf(raw, s.id).map((f) => f.h.length)).toEqual([4096, 904]);
    raw.session.destroy();
  });

  test("window granted while nothing is being written is there for the next write", async () => {
    const raw = await rawPair();
    const s = await opened(raw, 100); // the ACK carries 100 bytes of extra window
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, 0, s.id, 50));
    await raw.session.ping(); // both grants have arrived
    expect(await written(s, Buffer.alloc(INITIAL_WINDOW + 150, 6))).toBeFalsy();
    await until(() => bytesOf(raw, s.id) === INITIAL_WINDOW + 150, 5000, "a window and the grants");
    expect(raw.session.closed).toBe(false);
    raw.session.destroy();
  });

  test("the peer's FIN ends only its side: we may still write, then end ours", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    s.resume();
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.FIN, s.id, 0));
    await new Promise((resolve) => s.once("end", resolve));
    await raw.session.ping(); // a side closed by itself would have sent its FIN by now
    expect(raw.peer.frames.some((f) => f.h.streamId === s.id && f.h.flags & Flag.FIN)).toBe(false);
    expect(await written(s, "reply")).toBeFalsy();
    s.end();
    await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.FIN) !== 0, "our FIN");
    expect(dataOf(raw, s.id).map((f) => f.payload!.toString())).toEqual(["reply"]);
    expect(raw.session.stats.openStreams).toBe(0);
    raw.session.destroy();
  });

  test("up to 64 KiB of writes wait for window before write() asks the writer to wait", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    expect(await written(s, Buffer.alloc(INITIAL_WINDOW))).toBeFalsy(); // the whole send window
    expect(s.write(Buffer.alloc(64 * 1024 - 1))).toBe(true);
    expect(s.write(Buffer.alloc(1))).toBe(false);
    raw.session.destroy();
  });

  test("destroy() resets the stream: the peer gets RST, a write waiting for window ECONNRESET", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    const done = written(s, Buffer.alloc(INITIAL_WINDOW + 1));
    await until(() => bytesOf(raw, s.id) === INITIAL_WINDOW, 5000, "one window");
    s.destroy();
    expect(await done).toMatchObject({ code: "ECONNRESET" });
    const rst = await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.RST) !== 0, "RST");
    expect(rst.type).toBe(FrameType.WindowUpdate);
    expect(raw.session.stats.openStreams).toBe(0);
    raw.session.destroy();
  });

  test("a write waiting for window fails with the reason when the peer resets the stream", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    s.on("error", () => {});
    const done = written(s, Buffer.alloc(INITIAL_WINDOW + 1));
    await until(() => bytesOf(raw, s.id) === INITIAL_WINDOW, 5000, "one window");
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.RST, s.id, 0));
    expect(await done).toMatchObject({ code: "ECONNRESET" });
    raw.session.destroy();
  });
});

describe("receiving", () => {
  test("credit goes out once half the window is consumed, not a byte before", async () => {
    // The window may not grow here: the ping below gives an RTT sample, and on a loaded machine the
    // grant can fall within 4 RTTs of the stream's start (the tuning tests below move the clock).
    const raw = await rawPair({ maxStreamWindow: INITIAL_WINDOW });
    const s = await opened(raw);
    raw.peer.send(encodeDataFrame(0, s.id, Buffer.alloc(INITIAL_WINDOW / 2 - 1)));
    await until(() => s.readableLength === INITIAL_WINDOW / 2 - 1, 5000, "the data");
    s.read();
    await raw.session.ping(); // an update, had one been sent, would be there by now
    expect(updatesOf(raw, s.id)).toEqual([]);
    raw.peer.send(encodeDataFrame(0, s.id, Buffer.alloc(1)));
    await until(() => s.readableLength === 1, 5000, "the last byte");
    s.read();
    const update = await raw.peer.next((h) => h.type === FrameType.WindowUpdate && h.length > 0, "update");
    expect(update.length).toBe(INITIAL_WINDOW / 2);
    expect(s.receiveWindow).toBe(INITIAL_WINDOW);
    expect(s.bytesReceived).toBe(INITIAL_WINDOW / 2);
    raw.session.destroy();
  });

  test("the peer may fill the window exactly; one byte more is a protocol error", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    s.on("error", () => {});
    const closed = new Promise<unknown[]>((resolve) => raw.session.once("close", (...a) => resolve(a)));
    raw.peer.send(
      encodeDataFrame(0, s.id, Buffer.alloc(INITIAL_WINDOW - 1)),
      encodeDataFrame(0, s.id, Buffer.alloc(1)),
    );
    await until(() => s.readableLength === INITIAL_WINDOW, 5000, "a whole window");
    await raw.session.ping(); // the session still answers
    raw.peer.send(encodeDataFrame(0, s.id, Buffer.alloc(1)));
    expect((await closed)[0]).toMatchObject({
      code: "ERR_YAMUX_PROTOCOL",
      message: expect.stringMatching(/window/),
    });
    expect(s.readableLength).toBe(INITIAL_WINDOW);
  });

  test("bytes read after the peer's FIN earn it no credit", async () => {
    const raw = await rawPair({ maxStreamWindow: INITIAL_WINDOW });
    const s = await opened(raw);
    raw.peer.send(encodeDataFrame(Flag.FIN, s.id, Buffer.alloc(HALF_WINDOW)));
    await until(() => s.readableLength === HALF_WINDOW, 5000, "the data and FIN");
    expect(s.read()).toHaveLength(HALF_WINDOW);
    await raw.session.ping(); // an update, had one been sent, would be there by now
    expect(updatesOf(raw, s.id)).toEqual([]);
    raw.session.destroy();
  });

  test("without keepalive, the first grant asks for an RTT sample, and only while there is none", async () => {
    const raw = await rawPair({ maxStreamWindow: INITIAL_WINDOW });
    const pings = () =>
      raw.peer.frames.filter((f) => f.h.type === FrameType.Ping && f.h.flags & Flag.SYN).length;
    const s = await opened(raw);
    raw.peer.send(encodeDataFrame(0, s.id, Buffer.alloc(HALF_WINDOW)));
    await until(() => s.readableLength === HALF_WINDOW, 5000, "the data");
    expect(pings()).toBe(0);
    s.read();
    await until(() => updatesOf(raw, s.id).length === 1, 5000, "the grant");
    await until(() => raw.session.rttMs > 0, 5000, "the sample");
    expect(pings()).toBe(1);
    raw.peer.send(encodeDataFrame(0, s.id, Buffer.alloc(HALF_WINDOW)));
    await until(() => s.readableLength === HALF_WINDOW, 5000, "more data");
    s.read();
    await until(() => updatesOf(raw, s.id).length === 2, 5000, "the second grant");
    expect(pings()).toBe(1);
    raw.session.destroy();
  });

  test("data after the peer's FIN is dropped, a second FIN is ignored", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    const errors: Error[] = [];
    s.on("error", (e) => errors.push(e));
    const chunks: string[] = [];
    s.on("data", (c: Buffer) => chunks.push(c.toString()));
    const ended = new Promise((resolve) => s.once("end", resolve));
    raw.peer.send(
      encodeDataFrame(Flag.FIN, s.id, Buffer.from("last")),
      encodeDataFrame(0, s.id, Buffer.from("late")),
      encodeHeader(FrameType.WindowUpdate, Flag.FIN, s.id, 0),
    );
    await ended;
    await raw.session.ping();
    expect(chunks).toEqual(["last"]);
    expect(errors).toEqual([]);
    expect(updatesOf(raw, s.id)).toEqual([]); // no credit for a side that is closed
    raw.session.destroy();
  });

  test("both FINs release the stream; a reset after its first answer is ECONNRESET", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    s.resume();
    s.end();
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.FIN, s.id, 0));
    await until(() => raw.session.stats.openStreams === 0, 5000, "release");

    const t = await opened(raw);
    const errored = new Promise((resolve) => t.once("error", resolve));
    raw.peer.send(
      encodeDataFrame(0, t.id, Buffer.from("x")),
      encodeHeader(FrameType.WindowUpdate, Flag.RST, t.id, 0),
    );
    expect(await errored).toMatchObject({ code: "ECONNRESET" });
    raw.session.destroy();
  });

  test("data as the first answer acknowledges the stream: its open timer stops", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const raw = await rawPair({ streamOpenTimeoutMs: 1000 });
    const s = await raw.session.open();
    await raw.peer.next((h) => h.streamId === s.id, "SYN");
    raw.peer.send(encodeDataFrame(0, s.id, Buffer.from("reply without ACK")));
    await until(() => s.readableLength > 0, 5000, "the reply");
    vi.advanceTimersByTime(10_000);
    expect(s.destroyed).toBe(false);
    raw.session.destroy();
  });
});

describe("streams the peer opens", () => {
  test("an accepted stream is acknowledged; a reset after that is ECONNRESET, not a refusal", async () => {
    const raw = await rawPair({ client: false });
    const accepted = raw.session.accept();
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.SYN, 1, 0));
    const s = await accepted;
    const ack = await raw.peer.next((h) => h.streamId === 1 && (h.flags & Flag.ACK) !== 0, "ACK");
    expect(ack.type).toBe(FrameType.WindowUpdate);
    const errored = new Promise((resolve) => s.once("error", resolve));
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.RST, 1, 0));
    expect(await errored).toMatchObject({ code: "ECONNRESET" });
    raw.session.destroy();
  });

  test("a session failing tells the streams it handed out why, and ends the ones it holds quietly", async () => {
    const raw = await rawPair({ client: false });
    const accepted = raw.session.accept();
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.SYN, 1, 0));
    const s = await accepted;
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.SYN, 3, 0)); // waits in the backlog
    await until(() => raw.session.stats.openStreams === 2, 5000, "the second stream");
    // The backlog's stream has no listener: an 'error' emitted on it would be thrown.
    const emitted: Array<{ id: number; event: string }> = [];
    const emit = YamuxStream.prototype.emit;
    vi.spyOn(YamuxStream.prototype, "emit").mockImplementation(function (this: YamuxStream, event, ...args) {
      emitted.push({ id: this.id, event: String(event) });
      return event === "error" && this.id === 3 ? true : emit.call(this, event, ...args);
    });
    const errored = new Promise((resolve) => s.once("error", resolve));
    raw.session.destroy(new Error("boom"));
    expect(await errored).toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED", cause: { message: "boom" } });
    await until(
      () => emitted.some((e) => e.id === 3 && e.event === "close"),
      5000,
      "the backlog's stream to close",
    );
    expect(emitted.filter((e) => e.event === "error").map((e) => e.id)).toEqual([1]);
  });
});

describe("timers", () => {
  test("0 disables the open and the close timeouts", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const raw = await rawPair({ streamOpenTimeoutMs: 0, streamCloseTimeoutMs: 0 });
    const s = await raw.session.open();
    s.end("bye");
    await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.FIN) !== 0, "FIN");
    vi.advanceTimersByTime(10 * 60_000);
    expect(s.destroyed).toBe(false);
    expect(raw.session.stats.openStreams).toBe(1);
    raw.session.destroy();
  });

  test("a peer that never closes its side is reset once the close timeout after our FIN runs out", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const raw = await rawPair({ streamCloseTimeoutMs: 1000 });
    const s = await opened(raw);
    const errors: Error[] = [];
    s.on("error", (e) => errors.push(e));
    s.end();
    await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.FIN) !== 0, "FIN");
    vi.advanceTimersByTime(999);
    expect(s.destroyed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(s.destroyed).toBe(true);
    await new Promise((resolve) => s.once("close", resolve));
    expect(errors).toEqual([
      expect.objectContaining({ code: "ETIMEDOUT", message: expect.stringMatching(/1000 ms/) }),
    ]);
    await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.RST) !== 0, "RST");
    expect(raw.session.stats.openStreams).toBe(0);
    raw.session.destroy();
  });

  test("a stream not acknowledged in time is reset with ETIMEDOUT, naming the time", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const raw = await rawPair({ streamOpenTimeoutMs: 1000 });
    const s = await raw.session.open();
    const errors: Error[] = [];
    s.on("error", (e) => errors.push(e));
    vi.advanceTimersByTime(999);
    expect(s.destroyed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(s.destroyed).toBe(true);
    await new Promise((resolve) => s.once("close", resolve));
    expect(errors).toEqual([
      expect.objectContaining({ code: "ETIMEDOUT", message: expect.stringMatching(/1000 ms/) }),
    ]);
    raw.session.destroy();
  });
});

describe("window auto-tuning, on a clock the test moves", () => {
  const HALF = INITIAL_WINDOW / 2;

  /** A session whose RTT is exactly `rtt` ms of the faked performance clock. */
  async function withRtt(rtt: number, opts: { maxStreamWindow?: number } = {}) {
    vi.useFakeTimers({ toFake: ["performance"] });
    const raw = await rawPair(opts);
    raw.peer.answerPings = false;
    vi.advanceTimersByTime(1000); // the clock is not at 0 when the ping leaves
    const pong = raw.session.ping(5000);
    await raw.peer.next((h) => h.type === FrameType.Ping, "ping");
    vi.advanceTimersByTime(rtt);
    raw.peer.send(encodeHeader(FrameType.Ping, Flag.ACK, 0, 0));
    expect(await pong).toBe(rtt);
    return raw;
  }

  /** The peer sends `bytes`, the reader consumes them: resolves with the grant it caused. */
  async function consume(raw: Raw, s: YamuxStream, bytes = HALF): Promise<number> {
    const before = updatesOf(raw, s.id).length;
    raw.peer.send(encodeDataFrame(0, s.id, Buffer.alloc(bytes)));
    await until(() => s.readableLength === bytes, 5000, "the data");
    s.read();
    await until(() => updatesOf(raw, s.id).length > before, 5000, "the grant");
    return updatesOf(raw, s.id).at(-1)!.h.length;
  }

  test("a window consumed within 4 RTTs of the last grant doubles; at 4 RTTs it does not", async () => {
    const raw = await withRtt(100);
    const s = await opened(raw);
    vi.advanceTimersByTime(399);
    expect(await consume(raw, s)).toBe(HALF + INITIAL_WINDOW); // credit plus the growth
    expect(s.receiveWindow).toBe(2 * INITIAL_WINDOW);
    vi.advanceTimersByTime(400); // counted from that grant, not from the stream's start
    expect(await consume(raw, s, INITIAL_WINDOW)).toBe(INITIAL_WINDOW); // half the window, no growth
    expect(s.receiveWindow).toBe(2 * INITIAL_WINDOW);
    raw.session.destroy();
  });

  test("growth stops at maxStreamWindow", async () => {
    const max = INITIAL_WINDOW + 1000;
    const raw = await withRtt(100, { maxStreamWindow: max });
    const s = await opened(raw);
    expect(await consume(raw, s)).toBe(HALF + 1000);
    expect(s.receiveWindow).toBe(max);
    expect(await consume(raw, s, max / 2)).toBe(max / 2); // no further
    expect(s.receiveWindow).toBe(max);
    raw.session.destroy();
  });

  test("a later stream's first growth jumps to the largest window the session reached", async () => {
    const raw = await withRtt(100);
    const first = await opened(raw);
    for (let i = 0; i < 3; i++) await consume(raw, first, first.receiveWindow / 2);
    expect(first.receiveWindow).toBe(8 * INITIAL_WINDOW);
    const second = await opened(raw);
    expect(await consume(raw, second)).toBe(HALF + 7 * INITIAL_WINDOW);
    expect(second.receiveWindow).toBe(8 * INITIAL_WINDOW);
    const third = await opened(raw);
    expect(await consume(raw, third)).toBe(HALF + 7 * INITIAL_WINDOW);
    raw.session.destroy();
  });
});

describe("closing", () => {
  /** Resolves once everything the session sent before the call has reached the peer. */
  const settled = async (raw: Raw) => {
    await raw.session.ping();
  };
  const rstsOf = (raw: Raw, id: number) =>
    raw.peer.frames.filter((f) => f.h.streamId === id && f.h.flags & Flag.RST);

  test("a reset as the peer's first answer is a refusal", async () => {
    const raw = await rawPair();
    const s = await raw.session.open();
    const errored = new Promise((resolve) => s.once("error", resolve));
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.RST, s.id, 0));
    expect(await errored).toMatchObject({ code: "ECONNREFUSED" });
    raw.session.destroy();
  });

  test("the peer's FIN first, then ours: released, and a clean end sends no reset", async () => {
    const raw = await rawPair();
    const s = await opened(raw);
    raw.peer.send(encodeDataFrame(Flag.FIN, s.id, Buffer.alloc(HALF_WINDOW)));
    await until(() => s.readableLength === HALF_WINDOW, 5000, "the data and FIN");
    s.resume(); // consumed after the peer's FIN: no credit for a side that is closed
    s.end();
    await until(() => raw.session.stats.openStreams === 0, 5000, "release");
    await new Promise((resolve) => s.once("close", resolve));
    await settled(raw);
    expect(updatesOf(raw, s.id)).toEqual([]);
    expect(rstsOf(raw, s.id)).toEqual([]);
    raw.session.destroy();
  });

  test("ours first, then the peer's: the close timer stops, however late the reader reads", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const raw = await rawPair({ streamCloseTimeoutMs: 1000 });
    const s = await opened(raw);
    const errors: Error[] = [];
    s.on("error", (e) => errors.push(e));
    s.end();
    await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.FIN) !== 0, "FIN");
    raw.peer.send(encodeDataFrame(Flag.FIN, s.id, Buffer.from("unread")));
    await until(() => raw.session.stats.openStreams === 0, 5000, "release");
    vi.advanceTimersByTime(5000);
    expect(errors).toEqual([]);
    expect(s.destroyed).toBe(false);
    s.resume();
    await new Promise((resolve) => s.once("close", resolve));
    await settled(raw);
    expect(rstsOf(raw, s.id)).toEqual([]);
    raw.session.destroy();
  });
});

describe("a congested session", () => {
  test("a writer held back by the session's queue goes on once the connection drains", async () => {
    // A connection whose writes complete only once the test opens it: congested from the first frame.
    const pending: Array<() => void> = [];
    let open = false;
    const out: Buffer[] = [];
    const conn = new Duplex({
      read() {},
      writableHighWaterMark: 1,
      write(chunk: Buffer, _enc, cb) {
        out.push(Buffer.from(chunk));
        if (open) cb();
        else pending.push(cb);
      },
    });
    const session = new Session(conn, {
      client: true,
      keepAliveIntervalMs: 0,
      maxFrameSize: 1024,
      writeBufferSize: 4096,
    });
    const s = await session.open();
    conn.push(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, 1 << 20));
    const total = 20 * 1024;
    const done = written(s, Buffer.alloc(total, 5));
    await new Promise((resolve) => setImmediate(resolve));
    expect(s.bytesSent).toBeLessThan(total); // held back at the session's bound
    open = true;
    for (const cb of pending.splice(0)) cb();
    expect(await done).toBeFalsy();
    expect(s.bytesSent).toBe(total);
    let data = 0;
    new FrameDecoder(1 << 30, (h) => {
      if (h.type === FrameType.Data) data += h.length;
    }).push(Buffer.concat(out));
    expect(data).toBe(total);
    session.destroy();
  });

  test("a writer held back waits once for room, however many grants come meanwhile", async () => {
    const waits = vi.spyOn(FrameWriter.prototype, "waitWritable");
    const pending: Array<() => void> = [];
    const conn = new Duplex({
      read() {},
      writableHighWaterMark: 1,
      write(_chunk: Buffer, _enc, cb) {
        pending.push(cb);
      },
    });
    const session = new Session(conn, {
      client: true,
      keepAliveIntervalMs: 0,
      maxFrameSize: 1024,
      writeBufferSize: 4096,
    });
    const s = await session.open();
    let result: Error | null | undefined | "pending" = "pending";
    s.write(Buffer.alloc(20 * 1024, 5), (err) => {
      result = err;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(waits).toHaveBeenCalledTimes(1); // held back at the session's bound
    for (let i = 0; i < 10; i++) conn.push(encodeHeader(FrameType.WindowUpdate, 0, s.id, 1024));
    await until(() => session.stats.bytesIn === 10 * 12, 5000, "the grants");
    await new Promise((resolve) => setImmediate(resolve));
    expect(waits).toHaveBeenCalledTimes(1);
    const confirm = () => {
      for (const cb of pending.splice(0)) cb();
      return result !== "pending";
    };
    await until(confirm, 5000, "the rest of the write");
    expect(result).toBeFalsy();
    expect(s.bytesSent).toBe(20 * 1024);
    session.destroy();
  });
});

describe("write callbacks", () => {
  /** A session on a connection that takes every write but confirms none until `release()`. */
  async function unconfirmed() {
    const pending: Array<() => void> = [];
    const conn = new Duplex({
      read() {},
      writableHighWaterMark: 1 << 30, // never congested: only the confirmations are held
      write(_chunk: Buffer, _enc, cb) {
        pending.push(cb);
      },
    });
    const session = new Session(conn, { client: true, keepAliveIntervalMs: 0 });
    const s = await session.open();
    conn.push(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, 1 << 20));
    await until(() => pending.length > 0, 5000, "the SYN");
    await new Promise((resolve) => setImmediate(resolve)); // the ACK is in
    const release = () => {
      for (const cb of pending.splice(0)) cb();
    };
    return { session, s, release };
  }

  /** The write callback has not come a turn later, and comes once the connection confirms its writes. */
  async function calledOnlyOnceConfirmed(called: () => boolean, release: () => void): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    expect(called()).toBe(false);
    await until(
      () => {
        release();
        return called();
      },
      5000,
      "the callback",
    );
  }

  // Payloads of 16 KiB and more go to the connection by reference: the caller may reuse its buffer
  // only once the connection has taken them.
  test("a large write completes once the connection has taken its last frame, not before", async () => {
    const { session, s, release } = await unconfirmed();
    let done = false;
    s.write(Buffer.alloc(20 * 1024), () => {
      done = true;
    });
    await calledOnlyOnceConfirmed(() => done, release);
    session.destroy();
  });

  test("so does a large writev, whose last chunks are empty", async () => {
    const { session, s, release } = await unconfirmed();
    let done = false;
    s.cork();
    s.write(Buffer.alloc(20 * 1024));
    s.write(Buffer.alloc(20 * 1024));
    s.write(Buffer.alloc(0));
    s.write(Buffer.alloc(0), () => {
      done = true;
    });
    s.uncork();
    await calledOnlyOnceConfirmed(() => done, release);
    expect(s.bytesSent).toBe(40 * 1024);
    session.destroy();
  });
});

test("a writev's chunks leave in one write, even when the first is small enough to go alone", async () => {
  // A connection that takes every write at once and counts them: corked writes arrive as one writev.
  let writes = 0;
  const conn = new Duplex({
    read() {},
    write(_chunk: Buffer, _enc, cb) {
      writes++;
      cb();
    },
    writev(_chunks, cb) {
      writes++;
      cb();
    },
  });
  const session = new Session(conn, { client: true, keepAliveIntervalMs: 0 });
  const s = await session.open();
  await new Promise((resolve) => setImmediate(resolve)); // the SYN is out
  writes = 0;
  s.cork();
  s.write(Buffer.alloc(100, 1));
  s.write(Buffer.alloc(20 * 1024, 2)); // together over 16 KiB: two frames, not joined
  s.uncork();
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.bytesSent).toBe(100 + 20 * 1024);
  expect(writes).toBe(1);
  session.destroy();
});

test("after a large writev (sent corked), a small write still leaves at once, in the same tick", async () => {
  const raw = await rawPair();
  const s = await opened(raw);
  s.cork();
  s.write(Buffer.alloc(20 * 1024));
  s.write(Buffer.alloc(20 * 1024));
  s.uncork();
  await until(() => bytesOf(raw, s.id) === 40 * 1024, 5000, "the writev");
  const conn = raw.sockets[0];
  const write = conn.write.bind(conn);
  let calls = 0;
  conn.write = ((...args: unknown[]) => {
    calls++;
    return (write as (...a: unknown[]) => boolean)(...args);
  }) as typeof conn.write;
  s.write("now");
  expect(calls).toBe(1);
  raw.session.destroy();
});
