// The session's bookkeeping at its edges, against a raw peer: stream ids, the accept paths, pings,
// GoAway, and what destroy() settles. Each test fails if the rule it names breaks.
import { once } from "node:events";
import { Duplex } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  Flag,
  FrameType,
  GoAwayCode,
  HEADER_SIZE,
  INITIAL_WINDOW,
  Session,
} from "../../../lib/tunnel/yamux/index.ts";
import { until } from "../../support/until.ts";
import { rawPair } from "./harness.ts";

// A broken rule should fail its test well before the suite's minute: a mutation run (MUTATION.md)
// would otherwise count it a timeout and restart its worker.
vi.setConfig({ testTimeout: 8_000 });

const syn = (id: number) => encodeHeader(FrameType.WindowUpdate, Flag.SYN, id, 0);

describe("stream ids", () => {
  test("a client opens 1, 3, 5 and a server 2, 4; each accepts the other parity only", async () => {
    const client = await rawPair();
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const s = await client.session.open();
      s.on("error", () => {}); // the protocol error below ends them
      ids.push(s.id);
    }
    expect(ids).toEqual([1, 3, 5]);
    await client.peer.next((h) => h.streamId === 5, "SYN 5");
    const syns = client.peer.frames.filter((f) => f.h.flags === Flag.SYN).map((f) => f.h.streamId);
    expect(syns).toEqual([1, 3, 5]);
    // The client accepts an even id, and refuses an odd one as a protocol error.
    const accepted = client.session.accept();
    client.peer.send(syn(2));
    const inbound = await accepted;
    inbound.on("error", () => {});
    expect(inbound.id).toBe(2);
    const closed = once(client.session, "close");
    client.peer.send(syn(7));
    expect((await closed)[0]).toMatchObject({
      code: "ERR_YAMUX_PROTOCOL",
      message: expect.stringMatching(/parity/),
    });

    const server = await rawPair({ client: false });
    expect([(await server.session.open()).id, (await server.session.open()).id]).toEqual([2, 4]);
    server.session.destroy();
  });
});

describe("accepting", () => {
  test("accept() before the SYN arrives gets the stream and acknowledges it", async () => {
    const { session, peer } = await rawPair({ client: false });
    const first = session.accept();
    const second = session.accept();
    peer.send(syn(1), syn(3));
    expect([(await first).id, (await second).id]).toEqual([1, 3]);
    await peer.next((h) => h.streamId === 3, "ACK 3");
    expect(peer.frames.filter((f) => f.h.flags === Flag.ACK).map((f) => f.h.streamId)).toEqual([1, 3]);
    session.destroy();
  });

  test("with a listener, the backlog bound no longer applies: streams go to it", async () => {
    const { session, peer } = await rawPair({ client: false, acceptBacklog: 1 });
    peer.send(syn(1)); // fills the backlog
    await until(() => session.stats.openStreams === 1, 5000, "stream 1 in the backlog");
    const got: number[] = [];
    session.on("stream", (s) => got.push(s.id));
    peer.send(syn(3));
    expect((await peer.next((h) => h.streamId === 3, "reply to SYN 3")).flags).toBe(Flag.ACK);
    expect(got).toEqual([3]);
    session.destroy();
  });

  test("a stream reset while in the backlog leaves it: accept() skips it", async () => {
    const { session, peer } = await rawPair({ client: false, acceptBacklog: 1 });
    const closedIds: number[] = [];
    session.on("streamClosed", (id) => closedIds.push(id));
    peer.send(syn(1), encodeHeader(FrameType.WindowUpdate, Flag.RST, 1, 0));
    await until(() => closedIds.length === 1, 5000, "stream 1 to leave");
    expect(closedIds).toEqual([1]);
    expect(session.stats.openStreams).toBe(0);
    peer.send(syn(3)); // the backlog has room again
    const s = await session.accept();
    expect(s.id).toBe(3);
    expect((await peer.next((h) => h.streamId === 3, "reply to SYN 3")).flags).toBe(Flag.ACK);
    session.destroy();
  });

  test("a stream leaving the table takes only its own place in the backlog", async () => {
    const { session, peer } = await rawPair({ client: false });
    peer.send(syn(1), syn(3), syn(5));
    await until(() => session.stats.openStreams === 3, 5000, "three streams in the backlog");
    const mine = await session.open(); // not in the backlog
    mine.destroy();
    peer.send(encodeHeader(FrameType.WindowUpdate, Flag.RST, 3, 0));
    await until(() => session.stats.openStreams === 2, 5000, "stream 3 to leave");
    expect([(await session.accept()).id, (await session.accept()).id]).toEqual([1, 5]);
    session.destroy();
  });

  test("a stream opened and reset in one frame is never delivered", async () => {
    const { session, peer } = await rawPair({ client: false });
    const got: number[] = [];
    session.on("stream", (s) => got.push(s.id));
    peer.send(encodeHeader(FrameType.WindowUpdate, Flag.SYN | Flag.RST, 1, 0), syn(3));
    await peer.next((h) => h.streamId === 3, "ACK 3");
    expect(got).toEqual([3]);
    expect(peer.frames.some((f) => f.h.streamId === 1)).toBe(false);
    expect(session.stats.openStreams).toBe(1);
    session.destroy();
  });

  test("a SYN carrying data delivers the data with the stream", async () => {
    const { session, peer } = await rawPair({ client: false });
    const accepted = session.accept();
    peer.send(encodeDataFrame(Flag.SYN, 1, Buffer.from("first bytes")));
    const s = await accepted;
    const [chunk] = (await once(s, "data")) as [Buffer];
    expect(chunk.toString()).toBe("first bytes");
    expect(s.bytesReceived).toBe(11);
    session.destroy();
  });
});

describe("frames the session drops or refuses", () => {
  test("frames for streams that are gone (or never were) are dropped, the session goes on", async () => {
    const { session, peer } = await rawPair();
    peer.send(
      encodeDataFrame(0, 2, Buffer.from("nobody")),
      encodeHeader(FrameType.WindowUpdate, 0, 4, 100),
      encodeHeader(FrameType.WindowUpdate, Flag.FIN, 6, 0),
    );
    expect(await session.ping()).toBeGreaterThan(0);
    expect(session.closed).toBe(false);
    session.destroy();
  });

  test("an empty Data frame carrying FIN ends the stream", async () => {
    const { session, peer } = await rawPair();
    const s = await session.open();
    s.resume();
    peer.send(encodeDataFrame(Flag.ACK | Flag.FIN, s.id, Buffer.alloc(0)));
    await once(s, "end");
    expect(s.bytesReceived).toBe(0);
    session.destroy();
  });

  test("data beyond the receive window is a protocol error", async () => {
    const { session, peer } = await rawPair({ client: false });
    session.on("stream", (s) => s.on("error", () => {}));
    const closed = once(session, "close");
    peer.send(
      syn(1),
      encodeDataFrame(0, 1, Buffer.alloc(INITIAL_WINDOW)),
      encodeDataFrame(0, 1, Buffer.alloc(1)),
    );
    expect((await closed)[0]).toMatchObject({
      code: "ERR_YAMUX_PROTOCOL",
      message: expect.stringMatching(/receive window/),
    });
    expect((await peer.next((h) => h.type === FrameType.GoAway, "GoAway")).length).toBe(
      GoAwayCode.ProtocolError,
    );
  });

  test("a window update opens the send window of the stream it names", async () => {
    const { session, peer } = await rawPair();
    const s = await session.open();
    s.write(Buffer.alloc(INITIAL_WINDOW + 10, 7));
    await until(
      () => peer.frames.reduce((n, f) => n + (f.payload?.length ?? 0), 0) === INITIAL_WINDOW,
      5000,
      "one window of data",
    );
    peer.send(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, 10));
    await until(
      () => peer.frames.reduce((n, f) => n + (f.payload?.length ?? 0), 0) === INITIAL_WINDOW + 10,
      5000,
      "the rest after the update",
    );
    session.destroy();
  });
});

describe("pings", () => {
  test("each ping has its own opaque value, and an answer to none is ignored", async () => {
    const { session, peer } = await rawPair();
    peer.answerPings = false;
    const a = session.ping(5000);
    const b = session.ping(5000);
    await peer.next((h) => h.type === FrameType.Ping && h.length === 1, "the second ping");
    const opaques = peer.frames.filter((f) => f.h.type === FrameType.Ping).map((f) => f.h.length);
    expect(opaques).toEqual([0, 1]);
    peer.send(encodeHeader(FrameType.Ping, Flag.ACK, 0, 99)); // answers no ping
    peer.send(encodeHeader(FrameType.Ping, Flag.ACK, 0, 1));
    expect(await b).toBeGreaterThan(0);
    expect(session.rttMs).toBe(await b);
    peer.send(encodeHeader(FrameType.Ping, Flag.ACK, 0, 0));
    expect(await a).toBeGreaterThan(0);
    session.destroy();
  });

  test("an unanswered ping rejects after its timeout; a late answer changes nothing", async () => {
    const { session, peer } = await rawPair();
    peer.answerPings = false;
    await expect(session.ping(30)).rejects.toMatchObject({
      code: "ETIMEDOUT",
      message: expect.stringMatching(/30 ms/),
    });
    peer.send(encodeHeader(FrameType.Ping, Flag.ACK, 0, 0));
    expect(await session.ping(50).catch((e) => e)).toMatchObject({ code: "ETIMEDOUT" }); // nobody answers
    expect(session.rttMs).toBe(0);
    expect(session.closed).toBe(false); // an explicit ping's timeout does not end the session
    session.destroy();
  }, 10_000);

  test("pings pending when the session closes reject with the cause", async () => {
    const { session, peer } = await rawPair();
    peer.answerPings = false;
    const pending = session.ping(60_000);
    const cause = new Error("gone");
    session.destroy(cause);
    const err = await pending.catch((e) => e);
    expect(err).toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED", cause });
    await expect(session.ping()).rejects.toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED" });
  });
});

describe("GoAway", () => {
  test("ours is sent once, with its code, and never after close", async () => {
    const { session, peer } = await rawPair({ client: false });
    expect(session.goingAway).toBe(false);
    session.goAway(GoAwayCode.InternalError);
    session.goAway();
    expect(session.goingAway).toBe(true);
    expect(session.closed).toBe(false);
    await session.ping();
    const goAways = peer.frames.filter((f) => f.h.type === FrameType.GoAway).map((f) => f.h.length);
    expect(goAways).toEqual([GoAwayCode.InternalError]);
    // Our own GoAway does not stop us opening streams.
    expect((await session.open()).id).toBe(2);
    session.destroy();

    const other = await rawPair();
    other.session.destroy();
    other.session.goAway();
    await once(other.peer.socket, "end");
    expect(other.peer.frames.filter((f) => f.h.type === FrameType.GoAway)).toEqual([]);
  });

  test("a protocol error after our normal GoAway still tells the peer why", async () => {
    const { session, peer } = await rawPair({ client: false });
    session.goAway();
    const closed = once(session, "close");
    peer.send(encodeDataFrame(0, 0, Buffer.from("x")));
    await closed;
    await once(peer.socket, "end");
    const goAways = peer.frames.filter((f) => f.h.type === FrameType.GoAway).map((f) => f.h.length);
    expect(goAways).toEqual([GoAwayCode.Normal, GoAwayCode.ProtocolError]);
  });

  test("the peer's normal GoAway keeps the session and its streams", async () => {
    const { session, peer } = await rawPair();
    const s = await session.open();
    const codes: number[] = [];
    session.on("goaway", (c) => codes.push(c));
    peer.send(encodeHeader(FrameType.GoAway, 0, 0, GoAwayCode.Normal));
    await until(() => codes.length === 1, 5000, "goaway");
    expect(codes).toEqual([GoAwayCode.Normal]);
    expect([session.closed, session.goingAway, s.destroyed]).toEqual([false, true, false]);
    peer.send(encodeDataFrame(Flag.ACK, s.id, Buffer.from("still here")));
    const [chunk] = (await once(s, "data")) as [Buffer];
    expect(chunk.toString()).toBe("still here");
    session.destroy();
  });

  test("the peer's GoAway with an unknown code ends the session, naming it", async () => {
    const { session, peer } = await rawPair();
    const closed = once(session, "close");
    peer.send(encodeHeader(FrameType.GoAway, 0, 0, GoAwayCode.ProtocolError));
    expect((await closed)[0]).toMatchObject({
      code: "ERR_YAMUX_PEER_GOAWAY",
      message: expect.stringMatching(/a protocol error/),
    });
  });
});

describe("destroy", () => {
  test("settles everything: accept waiters, the backlog, streams; then ends the connection", async () => {
    const { session, peer } = await rawPair({ client: false });
    peer.send(syn(1)); // waits in the backlog
    await until(() => session.stats.openStreams === 1, 5000, "stream 1 in the backlog");
    const mine = await session.open();
    const errs: Error[] = [];
    mine.on("error", (e) => errs.push(e));
    const cause = new Error("transport broke");
    const events: Array<Error | undefined> = [];
    session.on("close", (e) => events.push(e));
    session.destroy(cause);
    session.destroy(); // once only
    expect(events).toEqual([cause]);
    expect(session.closed).toBe(true);
    expect(session.stats.openStreams).toBe(0);
    await expect(session.accept()).rejects.toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED" });
    await new Promise((resolve) => mine.once("close", resolve)); // events.once would reject on 'error'
    expect(errs).toEqual([expect.objectContaining({ code: "ERR_YAMUX_SESSION_CLOSED", cause })]);
    await once(peer.socket, "end");
  });

  test("an accept waiter is rejected when the session closes", async () => {
    const { session } = await rawPair();
    const waiting = session.accept();
    session.destroy();
    await expect(waiting).rejects.toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED" });
  });

  test("the connection ending or failing closes the session", async () => {
    const a = await rawPair();
    const ended = once(a.session, "close");
    a.peer.socket.end();
    expect((await ended)[0]).toBeUndefined();

    const b = await rawPair();
    const failed = once(b.session, "close");
    b.sockets[0].destroy(new Error("wire cut"));
    const [err] = await failed;
    expect(err).toMatchObject({ message: "wire cut" });
  });

  test("a connection that never finishes closing is destroyed after closeTimeoutMs", async () => {
    const conn = new Duplex({
      read() {},
      write(_chunk, _enc, callback) {
        callback();
      },
      final() {}, // never done: the far end never takes the close
    });
    const session = new Session(conn, { client: true, keepAliveIntervalMs: 0, closeTimeoutMs: 20 });
    session.destroy();
    expect(conn.destroyed).toBe(false);
    await once(conn, "close");
    expect(conn.destroyed).toBe(true);
  });
});

describe("what a closed session leaves behind", () => {
  /** True once nothing holds `ref`'s session but the WeakRef (after a full collection). */
  const collected = async (ref: WeakRef<Session>) => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    gc();
    return ref.deref() === undefined;
  };

  test("the keepalive wheel lets go of a closed session", async () => {
    const leave = async () => {
      // Its own interval: a wheel no other test's sessions are on, and no tick comes during the test.
      const { session, sockets } = await rawPair({
        keepAliveIntervalMs: 7_777_000,
        keepAliveTimeoutMs: 60_000,
      });
      await until(() => session.rttMs > 0, 5000, "the first ping's answer");
      const closed = Promise.all(sockets.map((s) => once(s, "close")));
      session.destroy();
      sockets[1].destroy();
      await closed;
      return new WeakRef(session);
    };
    expect(await collected(await leave()), "the keepalive wheel holds the session").toBe(true);
  });

  test("a session closed by its connection's destruction sets no close backstop", async () => {
    const leave = async () => {
      const { session, sockets } = await rawPair({ closeTimeoutMs: 60_000 });
      const closed = once(session, "close");
      sockets[0].destroy(); // already destroyed when the session hears of it
      await closed;
      sockets[1].destroy();
      await once(sockets[1], "close");
      return new WeakRef(session);
    };
    expect(await collected(await leave()), "a close backstop holds the session").toBe(true);
  });
});

describe("stats", () => {
  test("bytes in and out count whole frames, headers included", async () => {
    const { session, peer } = await rawPair();
    expect(session.stats).toEqual({
      openStreams: 0,
      bytesIn: 0,
      bytesOut: 0,
      rttMs: 0,
      queuedControlFrames: 0,
    });
    await session.ping(); // a ping out, its answer in
    expect(session.stats.bytesIn).toBe(HEADER_SIZE);
    expect(session.stats.bytesOut).toBe(HEADER_SIZE);
    peer.send(encodeDataFrame(0, 2, Buffer.alloc(5))); // for no stream: counted all the same
    await until(() => session.stats.bytesIn === 2 * HEADER_SIZE + 5, 5000, "the data frame");
    session.destroy();
  });
});

describe("the connection's lifecycle", () => {
  /** A connection that keeps its writable side open after its readable side ends, as a WebSocket stream does. */
  const halfOpenConn = () =>
    new Duplex({
      read() {},
      write(_chunk, _enc, callback) {
        callback();
      },
    });

  test("its readable side ending closes the session, as does its closing", async () => {
    const a = halfOpenConn();
    const first = new Session(a, { client: true, keepAliveIntervalMs: 0 });
    a.push(null);
    a.resume();
    await once(first, "close");
    expect(a.writableEnded).toBe(true); // the session ended its side too

    const b = halfOpenConn();
    const second = new Session(b, { client: true, keepAliveIntervalMs: 0 });
    b.destroy();
    expect((await once(second, "close"))[0]).toBeUndefined();
  });

  test("an exception from an application listener is not taken for a protocol error", async () => {
    let deliver: (message: Buffer) => void = () => {};
    const conn = halfOpenConn();
    const session = new Session(
      conn,
      { client: false, keepAliveIntervalMs: 0 },
      {
        receive: (onMessage) => {
          deliver = onMessage;
        },
        sendNow: () => false,
      },
    );
    session.on("stream", () => {
      throw new Error("listener broke");
    });
    expect(() => deliver(syn(1))).toThrow("listener broke");
    expect(session.closed).toBe(false);
    expect(session.stats.openStreams).toBe(1);
    session.destroy();
  });
});

describe("keepalive", () => {
  afterEach(() => vi.useRealTimers());
  const interval = 1600; // its own keepalive wheel: no other test's sessions on it

  test("the first ping goes out at once; a quiet peer is pinged every interval, a talking one is not", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const { session, peer } = await rawPair({ keepAliveIntervalMs: interval, keepAliveTimeoutMs: 60_000 });
    const ours = () =>
      peer.frames.filter((f) => f.h.type === FrameType.Ping && f.h.flags === Flag.SYN).length;
    /** Everything the session sent before this call has reached the peer once it resolves. */
    let marker = 1000;
    const settled = async () => {
      const opaque = ++marker;
      peer.send(encodeHeader(FrameType.Ping, Flag.SYN, 0, opaque));
      await peer.next(
        (h) => h.type === FrameType.Ping && h.flags === Flag.ACK && h.length === opaque,
        "marker",
      );
    };
    await peer.next((h) => h.type === FrameType.Ping && h.flags === Flag.SYN, "the first ping");
    await until(() => session.rttMs > 0, 5000, "its answer");
    const base = session.stats.bytesIn;
    vi.advanceTimersByTime(interval); // quiet since: our own ping's answer does not count
    await peer.next(
      (h) => h.type === FrameType.Ping && h.flags === Flag.SYN && ours() === 2,
      "a keepalive ping",
    );
    await until(() => session.stats.bytesIn === base + HEADER_SIZE, 5000, "its answer");
    await settled(); // the peer talks (its marker ping) ...
    vi.advanceTimersByTime(interval); // ... so this tick sends nothing
    await settled();
    expect(ours()).toBe(2);
    session.destroy();
  });
});

describe("keepalive failures", () => {
  afterEach(() => vi.useRealTimers());

  test("a keepalive ping left unanswered ends the session with ETIMEDOUT", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout"] });
    const { session, peer } = await rawPair({ keepAliveIntervalMs: 3200, keepAliveTimeoutMs: 500 });
    peer.answerPings = false;
    await peer.next((h) => h.type === FrameType.Ping && h.flags === Flag.SYN, "the first ping");
    const closed = once(session, "close");
    vi.advanceTimersByTime(499);
    expect(session.closed).toBe(false);
    vi.advanceTimersByTime(1);
    expect((await closed)[0]).toMatchObject({ code: "ETIMEDOUT" });
  });

  test("a duplicate SYN is a protocol error", async () => {
    const { session, peer } = await rawPair({ client: false });
    session.on("stream", (s) => s.on("error", () => {}));
    const closed = once(session, "close");
    peer.send(syn(1), syn(1));
    expect((await closed)[0]).toMatchObject({
      code: "ERR_YAMUX_PROTOCOL",
      message: expect.stringMatching(/duplicate SYN/),
    });
  });
});

describe("what open() and accept() refuse or find", () => {
  test("open() refuses after close, after the peer's GoAway, and beyond maxStreams", async () => {
    const a = await rawPair({ maxStreams: 2 });
    await a.session.open();
    await a.session.open(); // exactly at the limit: allowed
    await expect(a.session.open()).rejects.toMatchObject({ code: "ERR_YAMUX_TOO_MANY_STREAMS" });
    a.peer.send(encodeHeader(FrameType.GoAway, 0, 0, GoAwayCode.Normal));
    await once(a.session, "goaway");
    a.session.destroy();
    await expect(a.session.open()).rejects.toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED" });

    const b = await rawPair();
    b.peer.send(encodeHeader(FrameType.GoAway, 0, 0, GoAwayCode.Normal));
    await once(b.session, "goaway");
    await expect(b.session.open()).rejects.toMatchObject({ code: "ERR_YAMUX_REMOTE_GOAWAY" });
    b.session.destroy();
  });

  test("accept() takes a stream already waiting in the backlog, and acknowledges it then", async () => {
    const { session, peer } = await rawPair({ client: false });
    peer.send(syn(1));
    await until(() => session.stats.openStreams === 1, 5000, "stream 1 in the backlog");
    await session.ping(); // no ACK went out meanwhile
    expect(peer.frames.some((f) => f.h.streamId === 1)).toBe(false);
    const s = await session.accept();
    expect(s.id).toBe(1);
    expect((await peer.next((h) => h.streamId === 1, "ACK")).flags).toBe(Flag.ACK);
    session.destroy();
  });

  test("a connection that takes no bytes within the write timeout ends the session", async () => {
    const conn = new Duplex({
      read() {},
      writableHighWaterMark: 1,
      write() {}, // never completes: the peer stopped reading
    });
    const session = new Session(conn, { client: true, keepAliveIntervalMs: 0, connectionWriteTimeoutMs: 50 });
    const s = await session.open(); // its SYN congests the connection
    s.on("error", () => {});
    const [err] = await once(session, "close");
    expect(err).toMatchObject({ code: "ERR_YAMUX_WRITE_TIMEOUT" });
  });
});

describe("inbound streams refused", () => {
  const replyTo = async (peer: Awaited<ReturnType<typeof rawPair>>["peer"], id: number) =>
    (await peer.next((h) => h.streamId === id, `reply to SYN ${id}`)).flags;

  test("beyond the accept backlog (and not at it); after our GoAway; beyond maxStreams (and not at it)", async () => {
    const a = await rawPair({ client: false, acceptBacklog: 2 });
    a.peer.send(syn(1), syn(3), syn(5));
    expect(await replyTo(a.peer, 5)).toBe(Flag.RST);
    await a.session.ping();
    expect(a.peer.frames.some((f) => f.h.streamId === 1 || f.h.streamId === 3)).toBe(false); // waiting, not refused
    a.session.destroy();

    const b = await rawPair({ client: false, maxStreams: 2 });
    b.session.on("stream", () => {});
    b.peer.send(syn(1), syn(3), syn(5));
    expect(await replyTo(b.peer, 5)).toBe(Flag.RST);
    expect([await replyTo(b.peer, 1), await replyTo(b.peer, 3)]).toEqual([Flag.ACK, Flag.ACK]);
    b.session.goAway();
    b.session.destroy();

    const c = await rawPair({ client: false });
    c.session.on("stream", () => {});
    c.session.goAway();
    c.peer.send(syn(1));
    expect(await replyTo(c.peer, 1)).toBe(Flag.RST);
    c.session.destroy();
  });

  test("a stream is delivered once, whatever frames follow its SYN", async () => {
    const { session, peer } = await rawPair({ client: false });
    const got: number[] = [];
    session.on("stream", (s) => {
      got.push(s.id);
      s.resume();
    });
    peer.send(syn(1), encodeDataFrame(0, 1, Buffer.from("x")), encodeHeader(FrameType.WindowUpdate, 0, 1, 5));
    await session.ping();
    expect(got).toEqual([1]);
    session.destroy();
  });

  test("a stream frame on stream 0 is refused, naming it", async () => {
    const { session, peer } = await rawPair();
    const closed = once(session, "close");
    peer.send(encodeHeader(FrameType.WindowUpdate, 0, 0, 5));
    expect((await closed)[0]).toMatchObject({ message: expect.stringMatching(/stream frame on stream 0/) });
  });
});
