import { once } from "node:events";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, test } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  Flag,
  FrameType,
  GoAwayCode,
} from "../../../lib/tunnel/yamux/index.ts";
import { resolveOptions } from "../../../lib/tunnel/yamux/options.ts";
import { until } from "../../support/until.ts";
import { echo, rawPair, type SessionPair, sessionPair, sha256, sha256Of } from "./harness.ts";

const digestOf = (text: string) => ({ hex: sha256(Buffer.from(text)), bytes: Buffer.byteLength(text) });

let pair: SessionPair | undefined;
afterEach(() => pair?.close());

describe("ping and keepalive", () => {
  test("ping measures a round trip and the reply echoes the opaque value", async () => {
    const { session, peer } = await rawPair();
    const rtt = await session.ping();
    expect(rtt).toBeGreaterThan(0);
    expect(session.stats.rttMs).toBe(rtt);
    const sent = peer.frames.find((f) => f.h.type === FrameType.Ping)!.h;
    expect(sent.flags).toBe(Flag.SYN);
    peer.send(encodeHeader(FrameType.Ping, Flag.SYN, 0, 0xdeadbeef));
    const reply = await peer.next((h) => h.type === FrameType.Ping && h.flags === Flag.ACK, "ping reply");
    expect(reply.length).toBe(0xdeadbeef);
    session.destroy();
  });

  test("a peer that stops answering is declared dead and the session closes", async () => {
    const { session, peer } = await rawPair({ keepAliveIntervalMs: 50, keepAliveTimeoutMs: 200 });
    peer.answerPings = false;
    peer.socket.pause(); // stops reading altogether
    const [err] = await once(session, "close");
    expect(err).toMatchObject({ code: "ETIMEDOUT", message: expect.stringMatching(/did not answer a ping/) });
  });

  test("control frames overtake data queued behind a congested connection", async () => {
    const { session, peer } = await rawPair();
    const s = await session.open();
    await peer.next((h) => (h.flags & Flag.SYN) !== 0, "SYN");
    peer.send(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, 64 * 1024 * 1024)); // window is no limit
    peer.socket.pause(); // the kernel buffers fill, then the session's own queue does
    const block = Buffer.alloc(64 * 1024, 1);
    for (let i = 0; i < 512; i++) s.write(block);
    // The stream itself waits only when the session's queue is full behind a congested connection.
    await until(
      () => s.writableLength > 0 && s.writableLength < 512 * block.length,
      10_000,
      "writer congested",
    );
    const pong = session.ping(10_000);
    peer.socket.resume();
    await pong;
    const frames = peer.frames;
    const pingAt = frames.findIndex((f) => f.h.type === FrameType.Ping);
    const dataAfterPing = frames.slice(pingAt).filter((f) => f.h.type === FrameType.Data).length;
    expect(pingAt).toBeGreaterThan(0);
    expect(dataAfterPing).toBeGreaterThan(0); // the ping jumped over data queued before it
    session.destroy();
  });
});

describe("GoAway", () => {
  test("drain: the peer's new streams are refused while existing ones finish", async () => {
    pair = await sessionPair();
    echo(pair.server);
    const s = await pair.client.open();
    s.write("before GoAway, ");
    await once(s, "readable"); // the server has the stream before it says GoAway
    const reading = sha256Of(s);
    const goaway = once(pair.client, "goaway");
    pair.server.goAway();
    expect((await goaway)[0]).toBe(GoAwayCode.Normal);
    expect(pair.client.goingAway).toBe(true);
    await expect(pair.client.open()).rejects.toMatchObject({ code: "ERR_YAMUX_REMOTE_GOAWAY" });
    // As in the reference, the side that sent GoAway may still open streams itself.
    const fromServer = await pair.server.open();
    fromServer.destroy();
    s.end("after GoAway");
    expect((await reading).bytes).toBe("before GoAway, after GoAway".length);
  });

  test("a stream opened after our GoAway is reset", async () => {
    const { session, peer } = await rawPair({ client: false });
    session.goAway();
    await peer.next((h) => h.type === FrameType.GoAway, "GoAway");
    peer.send(encodeHeader(FrameType.WindowUpdate, Flag.SYN, 1, 0));
    const rst = await peer.next((h) => h.streamId === 1, "reply to SYN");
    expect(rst.flags).toBe(Flag.RST);
    session.destroy();
  });

  test("GoAway with an error code from the peer ends the session with that reason", async () => {
    const { session, peer } = await rawPair();
    const closed = once(session, "close");
    peer.send(encodeHeader(FrameType.GoAway, 0, 0, GoAwayCode.InternalError));
    expect((await closed)[0]).toMatchObject({ message: expect.stringMatching(/internal error/) });
  });
});

describe("limits", () => {
  test("options: defaults for the stalled-peer limits, and values that cannot work are refused", () => {
    const d = resolveOptions({ client: true });
    expect([d.maxControlQueue, d.connectionWriteTimeoutMs, d.streamCloseTimeoutMs]).toEqual([
      4 * 4096,
      30_000,
      300_000,
    ]);
    expect(resolveOptions({ client: true, maxStreams: 10 }).maxControlQueue).toBe(1024);
    expect(
      resolveOptions({ client: true, connectionWriteTimeoutMs: 0, streamCloseTimeoutMs: 0 }),
    ).toMatchObject(
      { connectionWriteTimeoutMs: 0, streamCloseTimeoutMs: 0 }, // 0 disables
    );
    for (const bad of [
      { maxControlQueue: 0 },
      { maxControlQueue: 1.5 },
      { connectionWriteTimeoutMs: -1 },
      { connectionWriteTimeoutMs: Number.NaN },
      { streamCloseTimeoutMs: 2 ** 31 }, // setTimeout would fire it after 1 ms
    ]) {
      expect(() => resolveOptions({ client: true, ...bad }), JSON.stringify(bad)).toThrow(RangeError);
    }
  });

  test("accept backlog: beyond it, inbound streams are reset; accepted ones are acknowledged", async () => {
    const { session, peer } = await rawPair({ client: false, acceptBacklog: 2 });
    peer.send(...[1, 3, 5].map((id) => encodeHeader(FrameType.WindowUpdate, Flag.SYN, id, 0)));
    const rst = await peer.next((h) => h.streamId === 5, "reply to the third SYN");
    expect(rst.flags).toBe(Flag.RST);
    expect(peer.frames.some((f) => f.h.streamId === 1)).toBe(false); // not acknowledged until accepted
    const first = await session.accept();
    expect(first.id).toBe(1);
    const ack = await peer.next((h) => h.streamId === 1, "ACK");
    expect(ack.flags).toBe(Flag.ACK);
    expect((await session.accept()).id).toBe(3);
    session.destroy();
  });

  test("max streams: local opens beyond it fail, remote ones are refused", async () => {
    pair = await sessionPair({ maxStreams: 2 });
    echo(pair.server);
    const a = await pair.client.open();
    const b = await pair.client.open();
    await expect(pair.client.open()).rejects.toMatchObject({ code: "ERR_YAMUX_TOO_MANY_STREAMS" });
    // Destroyed streams free their slots: at once here, once their RST arrives on the far side.
    a.destroy();
    b.destroy();
    expect(pair.client.stats.openStreams).toBe(0);
    await until(() => pair!.server.stats.openStreams === 0, 5000, "the server to drop the reset streams");
    const again = await pair.client.open();
    again.end("a slot again");
    expect((await sha256Of(again)).bytes).toBe("a slot again".length); // accepted and echoed, not refused
    pair.close();

    const { session, peer } = await rawPair({ client: false, maxStreams: 1 });
    session.on("stream", () => {});
    peer.send(
      encodeHeader(FrameType.WindowUpdate, Flag.SYN, 1, 0),
      encodeHeader(FrameType.WindowUpdate, Flag.SYN, 3, 0),
    );
    expect((await peer.next((h) => h.streamId === 3, "reply to SYN 3")).flags).toBe(Flag.RST);
    expect((await peer.next((h) => h.streamId === 1, "reply to SYN 1")).flags).toBe(Flag.ACK);
    session.destroy();
  });

  test("a stream the peer never acknowledges times out and is reset", async () => {
    const { session, peer } = await rawPair({ streamOpenTimeoutMs: 100 });
    const s = await session.open();
    const [err] = await once(s, "error");
    expect(err).toMatchObject({ code: "ETIMEDOUT" });
    const rst = await peer.next((h) => h.streamId === s.id && (h.flags & Flag.RST) !== 0, "RST");
    expect(rst.type).toBe(FrameType.WindowUpdate);
    session.destroy();
  });
});

describe("protocol violations end the session with GoAway(protocol error)", () => {
  const cases: Array<[string, Buffer[]]> = [
    ["SYN with the receiver's own id parity", [encodeHeader(FrameType.WindowUpdate, Flag.SYN, 2, 0)]],
    [
      "duplicate SYN",
      [
        encodeHeader(FrameType.WindowUpdate, Flag.SYN, 1, 0),
        encodeHeader(FrameType.WindowUpdate, Flag.SYN, 1, 0),
      ],
    ],
    ["stream frame on stream 0", [encodeDataFrame(0, 0, Buffer.from("x"))]],
    ["unknown frame type", [Buffer.from([0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])]],
  ];
  for (const [name, frames] of cases) {
    test(name, async () => {
      const { session, peer } = await rawPair({ client: false });
      session.on("stream", (s) => s.on("error", () => {}));
      const closed = once(session, "close");
      peer.send(...frames);
      expect((await closed)[0]).toMatchObject({ code: "ERR_YAMUX_PROTOCOL" });
      expect((await peer.next((h) => h.type === FrameType.GoAway, "GoAway")).length).toBe(
        GoAwayCode.ProtocolError,
      );
    });
  }

  test("a protocol error on one session leaves other sessions untouched", async () => {
    pair = await sessionPair();
    echo(pair.server);
    const seen: unknown[] = [];
    for (const other of [pair.client, pair.server]) {
      other.on("close", (err) => seen.push({ close: err }));
      other.on("goaway", (code) => seen.push({ goaway: code }));
    }
    const across = await pair.client.open(); // a stream in flight while the other session fails
    across.write("before, ");
    const acrossRead = sha256Of(across);

    const { session, peer } = await rawPair({ client: false });
    const closed = once(session, "close");
    peer.send(Buffer.from("GET / HTTP/1.1\r\n\r\n"));
    expect((await closed)[0]).toMatchObject({ code: "ERR_YAMUX_PROTOCOL" });

    across.end("after");
    expect(await acrossRead).toEqual(digestOf("before, after"));
    const fresh = await pair.client.open();
    fresh.end("still fine");
    expect(await sha256Of(fresh)).toEqual(digestOf("still fine"));
    expect([pair.client.closed, pair.server.closed, pair.client.goingAway]).toEqual([false, false, false]);
    expect(seen).toEqual([]);
  });
});

describe("keepalive economy", () => {
  test("a peer that keeps talking is not pinged; a quiet one is", async () => {
    const { session, peer } = await rawPair({ keepAliveIntervalMs: 60, keepAliveTimeoutMs: 5000 });
    const ours = () =>
      peer.frames.filter((f) => f.h.type === FrameType.Ping && f.h.flags === Flag.SYN).length;
    await peer.next((h) => h.type === FrameType.Ping && h.flags === Flag.SYN, "the first ping (RTT sample)");
    // The peer pings us every 10 ms: it is plainly alive, so the session sends no ping of its own.
    const chatter = setInterval(() => peer.send(encodeHeader(FrameType.Ping, Flag.SYN, 0, 1)), 10);
    const before = ours();
    const acks = () =>
      peer.frames.filter((f) => f.h.type === FrameType.Ping && f.h.flags === Flag.ACK).length;
    await until(() => acks() >= 40, 10_000, "40 answers to the peer's pings (several keepalive intervals)");
    clearInterval(chatter);
    expect(ours()).toBe(before);
    // Quiet again: the session pings.
    await peer.next(
      (h) => h.type === FrameType.Ping && h.flags === Flag.SYN && ours() > before,
      "a keepalive ping",
    );
    session.destroy();
  });
});

describe("after close", () => {
  test("a closed session is not held by its close backstop once its connection closed", async () => {
    const leave = async () => {
      const pair = await sessionPair({ closeTimeoutMs: 60_000 });
      const closed = Promise.all(pair.sockets.map((s) => once(s, "close")));
      pair.server.destroy(); // ends the connection; the backstop would destroy it after 60 s
      pair.client.destroy();
      await closed;
      return new WeakRef(pair.server);
    };
    const departed = await leave();
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    gc();
    expect(departed.deref(), "the close backstop holds the session").toBeUndefined();
  });
});
