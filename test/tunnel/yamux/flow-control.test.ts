import { once } from "node:events";
import { afterEach, expect, test } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  Flag,
  FrameType,
  GoAwayCode,
  INITIAL_WINDOW,
  Session,
  type YamuxStream,
} from "../../../lib/tunnel/yamux/index.ts";
import { delayedStreamPair } from "../../support/loopback.ts";
import { until } from "../../support/until.ts";
import { rawPair, type SessionPair, sessionPair, sha256, sha256Of } from "./harness.ts";

let pair: SessionPair | undefined;
afterEach(() => pair?.close());

test("a receiver that does not read holds the sender to one window plus one frame", async () => {
  pair = await sessionPair();
  const accepted = pair.server.accept();
  const s = await pair.client.open();
  const chunk = Buffer.alloc(16 * 1024, 9);
  let written = 0;
  let stalled = false;
  // Writes as a well-behaved producer would: until write() says stop, then waits for 'drain'.
  const producer = (async () => {
    while (written < 8 * 1024 * 1024) {
      written += chunk.length;
      if (!s.write(chunk)) {
        stalled = true;
        await once(s, "drain");
        stalled = false;
      }
    }
    s.end();
  })();
  const remote: YamuxStream = await accepted; // never read until the end of the check
  await until(() => remote.readableLength === INITIAL_WINDOW, 5000, "one full window buffered");
  await pair.client.ping(); // anything the sender could still send has arrived by now
  await pair.server.ping();
  expect(remote.readableLength).toBe(INITIAL_WINDOW);
  expect(stalled).toBe(true);
  const maxFrame = 64 * 1024;
  // Bytes the producer handed over but the receiver does not hold: waiting in the sender.
  const heldBySender = written - remote.readableLength;
  expect(heldBySender).toBeLessThanOrEqual(s.writableHighWaterMark + maxFrame);
  expect(s.writableLength).toBeLessThanOrEqual(s.writableHighWaterMark + chunk.length);
  // Reading again releases everything, intact.
  const got = await sha256Of(remote);
  await producer;
  expect(got.bytes).toBe(8 * 1024 * 1024);
  expect(got.hex).toBe(sha256(Buffer.alloc(8 * 1024 * 1024, 9)));
});

test("credit is returned only for consumed bytes, then in halves of the window", async () => {
  // The window may not grow here (window-tuning.test.ts tests that): the pings below give an RTT
  // sample, and on a loaded machine the grant can fall within it, which would let the window double.
  const { session, peer } = await rawPair({ client: false, maxStreamWindow: INITIAL_WINDOW });
  const accepted = session.accept();
  peer.send(encodeDataFrame(Flag.SYN, 1, Buffer.alloc(INITIAL_WINDOW, 1))); // fills the window exactly
  const remote = await accepted;
  await until(() => remote.readableLength === INITIAL_WINDOW, 5000, "window buffered");
  await session.ping();
  expect(peer.frames.some((f) => f.h.type === FrameType.WindowUpdate && f.h.length > 0)).toBe(false);
  remote.read(INITIAL_WINDOW / 4); // a quarter consumed: still below the threshold
  await session.ping();
  expect(peer.frames.some((f) => f.h.type === FrameType.WindowUpdate && f.h.length > 0)).toBe(false);
  remote.read(INITIAL_WINDOW / 4); // half consumed: credit for what was consumed
  const update = await peer.next((h) => h.type === FrameType.WindowUpdate && h.length > 0, "window update");
  expect(update.length).toBe(INITIAL_WINDOW / 2);
  session.destroy();
});

test("a peer that sends beyond its window is a protocol error answered with GoAway", async () => {
  const { session, peer } = await rawPair({ client: false });
  session.on("stream", (s) => s.on("error", () => {}));
  const closed = once(session, "close");
  peer.send(
    encodeDataFrame(Flag.SYN, 1, Buffer.alloc(INITIAL_WINDOW, 1)),
    encodeDataFrame(0, 1, Buffer.alloc(1)),
  );
  const [err] = await closed;
  expect(err).toMatchObject({ code: "ERR_YAMUX_PROTOCOL", message: expect.stringMatching(/receive window/) });
  const goAway = await peer.next((h) => h.type === FrameType.GoAway, "GoAway");
  expect(goAway.length).toBe(GoAwayCode.ProtocolError);
});

test("the receive window grows for a fast reader, never beyond the maximum", async () => {
  const max = 4 * 1024 * 1024;
  // A 20 ms path each way: the reader drains each grant well within the few round trips that
  // auto-tuning compares against (on bare loopback the RTT is too small to compare reliably).
  const [a, b] = delayedStreamPair(20);
  const opts = { keepAliveIntervalMs: 60_000, maxStreamWindow: max };
  const client = new Session(a, { ...opts, client: true });
  const server = new Session(b, { ...opts, client: false });
  try {
    // The first keepalive ping gives the RTT; wait for it (about 40 ms) on both sides.
    await until(() => client.rttMs > 0 && server.rttMs > 0, 5000, "the first RTT samples");
    const accepted = server.accept();
    const s = await client.open();
    const remote = await accepted;
    const reading = sha256Of(remote);
    const block = Buffer.alloc(1024 * 1024, 3);
    for (let i = 0; i < 16; i++) if (!s.write(block)) await once(s, "drain");
    s.end();
    expect((await reading).bytes).toBe(16 * 1024 * 1024);
    expect(remote.receiveWindow).toBeGreaterThan(INITIAL_WINDOW);
    expect(remote.receiveWindow).toBeLessThanOrEqual(max);
  } finally {
    client.destroy();
    server.destroy();
  }
});

test("window updates carry the RST and FIN flags like any other frame", async () => {
  const { session, peer } = await rawPair();
  const s = await session.open();
  peer.send(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, 1000));
  const ended = once(s, "end");
  peer.send(encodeHeader(FrameType.WindowUpdate, Flag.FIN, s.id, 0));
  s.resume();
  await ended;
  s.end();
  await peer.next((h) => h.streamId === s.id && (h.flags & Flag.FIN) !== 0, "our FIN");
  await until(() => session.stats.openStreams === 0, 5000, "stream released");
  session.destroy();
});
