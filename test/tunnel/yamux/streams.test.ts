import { once } from "node:events";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  Flag,
  FrameType,
  type YamuxStream,
} from "../../../lib/tunnel/yamux/index.ts";
import { until } from "../../support/until.ts";
import { echo, rawPair, type SessionPair, sessionPair, sha256Of } from "./harness.ts";

/** Reads to 'end' without destroying the stream (async iteration would destroy it at the end). */
async function texts(s: YamuxStream): Promise<string> {
  const chunks: Buffer[] = [];
  s.on("data", (c: Buffer) => chunks.push(c));
  await once(s, "end");
  return Buffer.concat(chunks).toString();
}

let pair: SessionPair | undefined;
afterEach(() => pair?.close());

describe("stream lifecycle", () => {
  test("client ids are odd, server ids even, and both sides can open", async () => {
    pair = await sessionPair();
    const a = await pair.client.open();
    const b = await pair.client.open();
    const c = await pair.server.open();
    expect([a.id, b.id, c.id]).toEqual([1, 3, 2]);
    const inbound = await pair.client.accept();
    expect(inbound.id).toBe(2);
  });

  test("half-close: the side that ended can still read, and the other side sees 'end'", async () => {
    pair = await sessionPair();
    const accepted = pair.server.accept();
    const s = await pair.client.open();
    s.end("request");
    const remote = await accepted;
    expect(await texts(remote)).toBe("request"); // 'end' seen after the data
    remote.write("response part 1, ");
    remote.end("part 2");
    expect(await texts(s)).toBe("response part 1, part 2");
    await until(() => pair!.client.stats.openStreams === 0 && pair!.server.stats.openStreams === 0);
  });

  test("the acceptor can half-close first", async () => {
    pair = await sessionPair();
    const accepted = pair.server.accept();
    const s = await pair.client.open();
    s.write("x");
    const remote = await accepted;
    remote.end("bye");
    expect(await texts(s)).toBe("bye");
    s.end("late but delivered");
    expect(await texts(remote)).toBe("xlate but delivered");
  });

  test("destroy() resets: the remote gets ECONNRESET and both tables drop the stream", async () => {
    pair = await sessionPair();
    const accepted = pair.server.accept();
    const s = await pair.client.open();
    s.write("hello");
    const remote = await accepted;
    const err = once(remote, "error");
    s.destroy();
    const [e] = await err;
    expect((e as NodeJS.ErrnoException).code).toBe("ECONNRESET");
    await until(() => pair!.client.stats.openStreams === 0 && pair!.server.stats.openStreams === 0);
  });

  test("a stream refused by the peer (RST before ACK) errors with ECONNREFUSED", async () => {
    const { session, peer } = await rawPair();
    const s = await session.open();
    await peer.next((h) => (h.flags & Flag.SYN) !== 0, "SYN");
    const err = once(s, "error");
    peer.send(encodeHeader(FrameType.WindowUpdate, Flag.RST, s.id, 0));
    expect(((await err)[0] as NodeJS.ErrnoException).code).toBe("ECONNREFUSED");
    session.destroy();
  });

  test("ACK|FIN and SYN|FIN frames as the reference sends them", async () => {
    const { session, peer } = await rawPair();
    // Peer acknowledges and closes in one frame.
    const s = await session.open();
    peer.send(encodeDataFrame(Flag.ACK | Flag.FIN, s.id, Buffer.from("only reply")));
    expect(await texts(s)).toBe("only reply");
    // Peer opens a stream with data and closes it in one frame.
    const accepted = session.accept();
    peer.send(encodeDataFrame(Flag.SYN | Flag.FIN, 2, Buffer.from("fire and forget")));
    const inbound = await accepted;
    expect(await texts(inbound)).toBe("fire and forget");
    await peer.next((h) => h.streamId === 2 && (h.flags & Flag.ACK) !== 0, "ACK for stream 2");
    session.destroy();
  });

  test("FIN never overtakes the data it ends", async () => {
    const { session, peer } = await rawPair();
    const s = await session.open();
    s.end(Buffer.alloc(200_000, 1)); // spans several frames
    await peer.next((h) => (h.flags & Flag.FIN) !== 0, "FIN");
    const frames = peer.frames.filter((f) => f.h.streamId === s.id);
    const finAt = frames.findIndex((f) => f.h.flags & Flag.FIN);
    const dataBytes = frames.slice(0, finAt).reduce((n, f) => n + (f.payload?.length ?? 0), 0);
    expect(dataBytes).toBe(200_000);
    session.destroy();
  });

  test("10,000 sequential open/close cycles on one session leave no stream behind", async () => {
    pair = await sessionPair();
    echo(pair.server);
    for (let i = 0; i < 10_000; i++) {
      const s = await pair.client.open();
      s.end(`#${i}`);
      const got = await texts(s);
      if (got !== `#${i}`) expect(got).toBe(`#${i}`);
    }
    expect(pair.client.stats.openStreams).toBe(0);
    await until(() => pair!.server.stats.openStreams === 0);
  }, 60_000);

  test("closing the session ends streams quietly, or with the cause when it failed", async () => {
    pair = await sessionPair();
    const quiet = await pair.client.open();
    const errors: Error[] = [];
    quiet.on("error", (e) => errors.push(e));
    const pendingAccept = pair.client.accept();
    const remoteGone = once(pair.server, "close");
    pair.client.destroy();
    await once(quiet, "close");
    expect(errors).toEqual([]);
    expect(quiet.readableEnded).toBe(false); // a reader can tell it was cut short
    await expect(pendingAccept).rejects.toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED" });
    await expect(pair.client.open()).rejects.toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED" });
    // The far side notices the connection went away, cleanly.
    expect((await remoteGone)[0]).toBeUndefined();

    pair = await sessionPair();
    const s = await pair.client.open();
    const err = once(s, "error");
    pair.client.destroy(new Error("transport broke"));
    const [e] = await err;
    expect(e).toMatchObject({ code: "ERR_YAMUX_SESSION_CLOSED" });
    expect((e as Error).cause).toMatchObject({ message: "transport broke" });
  });

  test("streams carry data both ways at once", async () => {
    pair = await sessionPair();
    echo(pair.server);
    const s = await pair.client.open();
    const data = Buffer.alloc(3 * 1024 * 1024, 5);
    const reading = sha256Of(s);
    s.end(data);
    expect((await reading).bytes).toBe(data.length);
  });
});

describe("streams left half-closed by the peer", () => {
  afterEach(() => vi.useRealTimers());
  const closeTimeout = 60_000;

  /** A stream we opened and closed (FIN sent), acknowledged by a raw peer that has not closed yet. */
  async function halfClosed() {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const raw = await rawPair({ streamCloseTimeoutMs: closeTimeout });
    const s = await raw.session.open();
    await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.SYN) !== 0, "SYN");
    raw.peer.send(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, 0));
    s.end("request");
    await raw.peer.next((h) => h.streamId === s.id && (h.flags & Flag.FIN) !== 0, "FIN");
    return { ...raw, s };
  }

  test("are reset once the close timeout runs out", async () => {
    const { session, peer, s } = await halfClosed();
    const errors: Error[] = [];
    s.on("error", (e) => errors.push(e));
    vi.advanceTimersByTime(closeTimeout - 1);
    expect(s.destroyed).toBe(false);
    expect(session.stats.openStreams).toBe(1);
    vi.advanceTimersByTime(1);
    expect(s.destroyed).toBe(true);
    expect(session.stats.openStreams).toBe(0);
    await new Promise((resolve) => s.once("close", resolve)); // events.once would reject on 'error'
    expect(errors).toEqual([expect.objectContaining({ code: "ETIMEDOUT" })]);
    const rst = await peer.next((h) => h.streamId === s.id && (h.flags & Flag.RST) !== 0, "RST");
    expect(rst.type).toBe(FrameType.WindowUpdate);
    session.destroy();
  });

  test("are left alone when the peer closes its side in time, however late we read", async () => {
    const { session, peer, s } = await halfClosed();
    s.on("error", () => {});
    peer.send(encodeDataFrame(Flag.FIN, s.id, Buffer.from("response")));
    await until(() => session.stats.openStreams === 0, 5000, "the peer's FIN");
    vi.advanceTimersByTime(2 * closeTimeout); // the response is still unread
    expect(s.errored).toBeNull();
    expect(await texts(s)).toBe("response");
    await session.ping(); // whatever the session sent before this has reached the peer
    expect(peer.frames.some((f) => f.h.streamId === s.id && (f.h.flags & Flag.RST) !== 0)).toBe(false);
    session.destroy();
  });
});
