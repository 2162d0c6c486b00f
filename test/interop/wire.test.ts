import { afterEach, beforeAll, describe, expect, test } from "vitest";
import { FrameDecoder, GoAwayCode, Session } from "../../lib/tunnel/yamux/index.ts";
import { framesOf, isStreamFrame, openingFields, streamViolations } from "./frame-rules.ts";
import { buildGoPeer } from "./go-build.ts";
import { killGoPeers, startGoPeer } from "./go-peer.ts";
import {
  dataFrame,
  F,
  fieldsOf,
  memoryPair,
  parseFrames,
  type RawFrame,
  RawPeer,
  rawFrame,
  T,
} from "./raw-wire.ts";
import { deadline, readAll } from "./streams.ts";

// Byte-level checks. hashicorp/yamux runs a fixed script against a raw recording socket; its bytes
// are pinned, our decoder and session must read them, and our session running the same script
// against the same recorder must write frames with the same header layout, by the rules spelled
// out in frame-rules.ts plus the exact-match checks below.

beforeAll(() => buildGoPeer(), 180_000);
afterEach(() => killGoPeers());

const hex = (...parts: string[]) => Buffer.from(parts.join("").replaceAll(" ", ""), "hex");
const isGoAway = (f: RawFrame) => f.type === T.GoAway;
const isFin = (id: number) => (f: RawFrame) =>
  isStreamFrame(f) && f.streamId === id && (f.flags & F.FIN) !== 0;
const isAck = (id: number) => (f: RawFrame) =>
  isStreamFrame(f) && f.streamId === id && (f.flags & F.ACK) !== 0;

// What hashicorp/yamux (client) writes for: OpenStream; Write("hello"); Close; Ping; GoAway.
// Layout: version(1) type(1) flags(2) stream id(4) length(4), big-endian.
const REFERENCE_CLIENT_SCRIPT = [
  hex("00 01 0001 00000001 00000000"), // WindowUpdate SYN stream 1, delta 0: OpenStream
  hex("00 00 0000 00000001 00000005", "68656c6c6f"), // Data stream 1 "hello": no flags once SYN went out
  hex("00 01 0004 00000001 00000000"), // WindowUpdate FIN stream 1: Close is a half-close
  hex("00 02 0001 00000000 00000000"), // Ping SYN, stream 0, opaque 0 (the first ping id)
  hex("00 03 0000 00000000 00000000"), // GoAway, stream 0, length = code 0 (normal)
];

// What the recorder sends to a server: a stream opened the way the reference client opens it, its
// FIN once the server acknowledged it, then a ping.
const PING_OPAQUE = 0x01020304;
const CLIENT_OPENING = Buffer.concat(REFERENCE_CLIENT_SCRIPT.slice(0, 2));
const CLIENT_CLOSING_AND_PING = Buffer.concat([
  REFERENCE_CLIENT_SCRIPT[2]!,
  rawFrame(T.Ping, F.SYN, 0, PING_OPAQUE),
]);

// What hashicorp/yamux (server) writes for: AcceptStream; read to EOF; echo; Close; OpenStream;
// Write("world"); Close; GoAway. Its ping answer (any position) is listed apart.
const REFERENCE_SERVER_SCRIPT = [
  hex("00 01 0002 00000001 00000000"), // WindowUpdate ACK stream 1, delta 0: AcceptStream
  hex("00 00 0000 00000001 00000005", "68656c6c6f"), // Data stream 1 "hello"
  hex("00 01 0004 00000001 00000000"), // WindowUpdate FIN stream 1
  hex("00 01 0001 00000002 00000000"), // WindowUpdate SYN stream 2: the server's first id is even
  hex("00 00 0000 00000002 00000005", "776f726c64"), // Data stream 2 "world"
  hex("00 01 0004 00000002 00000000"), // WindowUpdate FIN stream 2
  hex("00 03 0000 00000000 00000000"), // GoAway normal
];
const REFERENCE_PING_REPLY = hex("00 02 0002 00000000 01020304"); // Ping ACK echoing the opaque value

/** Our decoder, fed one byte at a time, must produce exactly the frames the oracle parser finds. */
function expectDecoderAgrees(bytes: Buffer): void {
  const decoded: Array<{ header: object; payload: string }> = [];
  const decoder = new FrameDecoder(16 * 1024 * 1024, (h, p) =>
    decoded.push({ header: { ...h }, payload: (p ?? Buffer.alloc(0)).toString("hex") }),
  );
  for (let i = 0; i < bytes.length; i++) decoder.push(bytes.subarray(i, i + 1));
  const { frames, rest } = parseFrames(bytes);
  expect(rest.length).toBe(0);
  expect(decoded).toEqual(frames.map((f) => ({ header: fieldsOf(f), payload: f.payload.toString("hex") })));
}

async function recordReferenceClient(): Promise<RawFrame[]> {
  const { peer, socket } = await startGoPeer("script-client");
  const raw = new RawPeer(socket, { answerPings: true });
  await raw.waitFor(isGoAway, "GoAway from the reference client");
  expect(await peer.waitFor("script-done")).toMatchObject({ err: "" });
  expect(await peer.waitExit()).toBe(0);
  return raw.frames;
}

async function recordReferenceServer(): Promise<RawFrame[]> {
  const { peer, socket } = await startGoPeer("script-server");
  const raw = new RawPeer(socket, { ackStreams: true });
  // FIN only after the ACK: a reference server that sees the FIN before AcceptStream never ACKs.
  raw.write(CLIENT_OPENING);
  await raw.waitFor(isAck(1), "ACK of stream 1");
  raw.write(CLIENT_CLOSING_AND_PING);
  await raw.waitFor(isGoAway, "GoAway from the reference server");
  // hashicorp/yamux answers a ping from a goroutine of its own: wait for that answer too before
  // hanging up, or it may be cut off (seen under load).
  await raw.waitFor((f) => f.type === T.Ping, "the reference server's ping answer");
  expect(await peer.waitFor("script-done")).toMatchObject({ err: "", read: "hello" });
  raw.close();
  expect(await peer.waitExit()).toBe(0);
  return raw.frames;
}

describe("client script: open, write 'hello', close, ping, GoAway", () => {
  let reference: RawFrame[];
  beforeAll(async () => {
    reference = await recordReferenceClient();
  }, 60_000);

  test("hashicorp/yamux writes exactly the pinned bytes", () => {
    expect(reference.map((f) => f.bytes.toString("hex"))).toEqual(
      REFERENCE_CLIENT_SCRIPT.map((b) => b.toString("hex")),
    );
  });

  test("our decoder parses every frame the reference wrote, split at every byte", () => {
    expectDecoderAgrees(Buffer.concat(reference.map((f) => f.bytes)));
  });

  test("our server session, fed the reference's bytes one at a time, sees the stream, the ping and the GoAway", async () => {
    const [ours, theirs] = memoryPair();
    const s = new Session(ours, { client: false, keepAliveIntervalMs: 0 });
    const raw = new RawPeer(theirs);
    const goaway = new Promise<number>((resolve) => s.once("goaway", resolve));
    const inbound = s.accept();
    raw.writeBytewise(Buffer.concat(reference.map((f) => f.bytes)));

    const st = await deadline(inbound, 5_000, "accept");
    expect(st.id).toBe(1);
    expect((await deadline(readAll(st), 5_000, "read stream 1")).toString()).toBe("hello");
    expect(await deadline(goaway, 5_000, "goaway event")).toBe(GoAwayCode.Normal);
    // Our answers are the reference server's, byte for byte.
    const pong = await raw.waitFor((f) => f.type === T.Ping, "ping answer");
    expect(pong.bytes.toString("hex")).toBe(rawFrame(T.Ping, F.ACK, 0, 0).toString("hex"));
    const ack = await raw.waitFor(isAck(1), "ACK of stream 1");
    expect(ack.bytes.toString("hex")).toBe(REFERENCE_SERVER_SCRIPT[0]!.toString("hex"));
    expect(s.closed).toBe(false);
    s.destroy();
  });

  test("our client session writes the same header layout for the same script", async () => {
    const [ours, theirs] = memoryPair();
    const raw = new RawPeer(theirs, { answerPings: true, ackStreams: true, finBack: true });
    const s = new Session(ours, { client: true, keepAliveIntervalMs: 0 });

    const st = await s.open();
    st.end("hello");
    await raw.waitFor(isFin(st.id), "our FIN");
    await deadline(s.ping(), 5_000, "our ping");
    s.goAway(GoAwayCode.Normal);
    await raw.waitFor(isGoAway, "our GoAway");
    const mine = raw.frames;

    // Stream 1: the same id (the first odd one), SYN first, "hello", FIN last: rules hold for both.
    const expectation = { streamId: 1, first: "SYN", payload: "hello" } as const;
    expect(streamViolations(reference, expectation)).toEqual([]);
    expect(streamViolations(mine, expectation)).toEqual([]);
    expect(openingFields(mine, 1)).toEqual(openingFields(reference, 1));
    expect(new Set(mine.filter(isStreamFrame).map((f) => f.streamId))).toEqual(new Set([1]));
    // Ping: version 0, type Ping, flags exactly SYN, stream 0; the opaque value is the sender's choice.
    const ping = (frames: RawFrame[]) =>
      frames.filter((f) => f.type === T.Ping).map((f) => ({ ...fieldsOf(f), length: 0 }));
    expect(ping(mine)).toEqual(ping(reference));
    // GoAway: identical bytes (type 3, no flags, stream 0, code 0 in the length field), and last.
    expect(mine.at(-1)!.bytes.toString("hex")).toBe(reference.at(-1)!.bytes.toString("hex"));
    expect(mine.filter(isGoAway)).toHaveLength(1);
    s.destroy();
  });
});

describe("server script: accept and echo, open its own stream, answer a ping, GoAway", () => {
  let reference: RawFrame[];
  beforeAll(async () => {
    reference = await recordReferenceServer();
  }, 60_000);

  test("hashicorp/yamux writes exactly the pinned bytes", () => {
    const streamAndGoAway = reference.filter((f) => f.type !== T.Ping);
    expect(streamAndGoAway.map((f) => f.bytes.toString("hex"))).toEqual(
      REFERENCE_SERVER_SCRIPT.map((b) => b.toString("hex")),
    );
    const pings = reference.filter((f) => f.type === T.Ping);
    expect(pings.map((f) => f.bytes.toString("hex"))).toEqual([REFERENCE_PING_REPLY.toString("hex")]);
  });

  test("our decoder parses every frame the reference wrote, split at every byte", () => {
    expectDecoderAgrees(Buffer.concat(reference.map((f) => f.bytes)));
  });

  test("our server session writes the same header layout for the same script", async () => {
    const [ours, theirs] = memoryPair();
    const raw = new RawPeer(theirs, { ackStreams: true });
    const s = new Session(ours, { client: false, keepAliveIntervalMs: 0 });
    const inbound = s.accept();
    raw.write(CLIENT_OPENING);
    await raw.waitFor(isAck(1), "our ACK of stream 1");
    raw.write(CLIENT_CLOSING_AND_PING);

    const st = await deadline(inbound, 5_000, "accept");
    st.end(await deadline(readAll(st), 5_000, "read stream 1"));
    const st2 = await s.open();
    st2.end("world");
    // Both FINs out before GoAway: as a control frame it would overtake a stream frame still queued.
    await raw.waitFor(isFin(1), "our FIN on stream 1");
    await raw.waitFor(isFin(st2.id), "our FIN on stream 2");
    await raw.waitFor((f) => f.type === T.Ping, "our ping answer");
    s.goAway(GoAwayCode.Normal);
    await raw.waitFor(isGoAway, "our GoAway");
    const mine = raw.frames;

    // Stream 1 (opened by the peer): ACK first, the echo, FIN last.
    const s1 = { streamId: 1, first: "ACK", payload: "hello" } as const;
    expect(streamViolations(reference, s1)).toEqual([]);
    expect(streamViolations(mine, s1)).toEqual([]);
    expect(openingFields(mine, 1)).toEqual(openingFields(reference, 1));
    // Stream 2 (ours): the first even id, SYN first, "world", FIN last.
    const s2 = { streamId: 2, first: "SYN", payload: "world" } as const;
    expect(streamViolations(reference, s2)).toEqual([]);
    expect(streamViolations(mine, s2)).toEqual([]);
    expect(openingFields(mine, 2)).toEqual(openingFields(reference, 2));
    expect(new Set(mine.filter(isStreamFrame).map((f) => f.streamId))).toEqual(new Set([1, 2]));
    // Ping answer: identical bytes (ACK, stream 0, the opaque value echoed).
    const pongs = (frames: RawFrame[]) =>
      frames.filter((f) => f.type === T.Ping).map((f) => f.bytes.toString("hex"));
    expect(pongs(mine)).toEqual(pongs(reference));
    // GoAway: identical bytes, and our last frame. (Not necessarily the reference's last: hashicorp/yamux
    // answers a ping from a goroutine of its own, which may write after the GoAway.)
    const goAways = (frames: RawFrame[]) => frames.filter(isGoAway).map((f) => f.bytes.toString("hex"));
    expect(goAways(mine)).toEqual(goAways(reference));
    expect(goAways(reference)).toHaveLength(1);
    expect(isGoAway(mine.at(-1)!)).toBe(true);
    expect(framesOf(mine, 0)).toEqual([]);
    s.destroy();
  });
});

describe("frames a peer may send that our session must take as the reference does", () => {
  test("SYN on a Data frame opens a stream; FIN may ride on the same frame", async () => {
    // The spec allows SYN and FIN with a payload; the reference accepts them (handleStreamMessage).
    const [ours, theirs] = memoryPair();
    const s = new Session(ours, { client: false, keepAliveIntervalMs: 0 });
    const raw = new RawPeer(theirs);
    const inbound = s.accept();
    raw.write(dataFrame(F.SYN | F.FIN, 1, Buffer.from("one frame")));
    const st = await deadline(inbound, 5_000, "accept");
    expect((await deadline(readAll(st), 5_000, "read")).toString()).toBe("one frame");
    expect(s.closed).toBe(false);
    s.destroy();
  });
});
