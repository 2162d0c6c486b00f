import { afterEach, beforeAll, describe, expect, test } from "vitest";
import { Session, type YamuxStream } from "../../lib/tunnel/yamux/index.ts";
import { framesOf } from "./frame-rules.ts";
import { buildGoPeer } from "./go-build.ts";
import { killGoPeers, startGoPeer } from "./go-peer.ts";
import { dataFrame, F, memoryPair, type RawFrame, RawPeer, rawFrame, T } from "./raw-wire.ts";
import { deadline, readAll, sessionFailure } from "./streams.ts";

// Wire sequences the reference produces or accepts that a strict reading of the spec might not
// expect. Each is first shown on hashicorp/yamux itself, then required of our session.

beforeAll(() => buildGoPeer(), 180_000);
afterEach(() => killGoPeers());

const isFin = (id: number) => (f: RawFrame) => f.streamId === id && (f.flags & F.FIN) !== 0;
const payloadOf = (frames: RawFrame[], id: number) =>
  Buffer.concat(framesOf(frames, id).map((f) => f.payload)).toString();

describe("SYNs for new stream ids arrive out of order", () => {
  // hashicorp/yamux takes an id in OpenStream and queues the SYN afterwards, so concurrent opens
  // reach the wire in any order (200 concurrent opens in echo.test.ts do this for real). It only
  // refuses an id that is still in use.
  const outOfOrder = Buffer.concat([
    rawFrame(T.WindowUpdate, F.SYN, 3, 0),
    dataFrame(F.FIN, 3, Buffer.from("three")),
    rawFrame(T.WindowUpdate, F.SYN, 1, 0),
    dataFrame(F.FIN, 1, Buffer.from("one")),
  ]);

  test("the reference accepts stream 3 before stream 1", async () => {
    const { peer, socket } = await startGoPeer("echo-server");
    const raw = new RawPeer(socket);
    raw.write(outOfOrder);
    await raw.waitFor(isFin(3), "FIN of stream 3");
    await raw.waitFor(isFin(1), "FIN of stream 1");
    expect(payloadOf(raw.frames, 3)).toBe("three");
    expect(payloadOf(raw.frames, 1)).toBe("one");
    expect(raw.frames.filter((f) => f.type === T.GoAway)).toEqual([]);
    raw.close();
    expect(await peer.waitExit()).toBe(0);
  });

  test("our session accepts stream 3 before stream 1", async () => {
    const [ours, theirs] = memoryPair();
    const s = new Session(ours, { client: false, keepAliveIntervalMs: 0 });
    const failed = sessionFailure(s);
    s.on("stream", (st: YamuxStream) => {
      st.on("error", () => {}); // a failing session aborts its streams; the failure is asserted below
      st.pipe(st);
    });
    const raw = new RawPeer(theirs);
    raw.write(outOfOrder);
    await Promise.race([raw.waitFor(isFin(3), "FIN of stream 3"), failed]);
    await Promise.race([raw.waitFor(isFin(1), "FIN of stream 1"), failed]);
    expect(payloadOf(raw.frames, 3)).toBe("three");
    expect(payloadOf(raw.frames, 1)).toBe("one");
    expect(raw.frames.filter((f) => f.type === T.GoAway)).toEqual([]);
    s.destroy();
  });
});

describe("a stream half-closed before the reference accepts it is never ACKed", () => {
  test("we still get the whole answer, even when it outlasts our open timeout", async () => {
    // The reference only adds ACK while the stream is in SYN-received state; our FIN moves it to
    // remote-closed first, so its answer comes as plain Data and a FIN with no ACK at all.
    const { peer, socket } = await startGoPeer("late-accept", {
      "accept-delay": "150ms",
      "reply-delay": "1s",
    });
    const tap = new RawPeer(socket); // passive: records what the reference sends
    const s = new Session(socket, { client: true, keepAliveIntervalMs: 0, streamOpenTimeoutMs: 500 });
    const failed = sessionFailure(s);

    const st = await s.open();
    st.end("request");
    const answer = await deadline(Promise.race([readAll(st), failed]), 10_000, "the answer");

    expect(answer.toString()).toBe("request:done");
    expect(await peer.waitFor("late-reply")).toMatchObject({ read: "request", err: "", writeErr: "" });
    expect(framesOf(tap.frames, st.id).filter((f) => f.flags & F.ACK)).toEqual([]); // the quirk
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });
});
