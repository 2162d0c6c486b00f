// The decoder's rules at their edges, one by one: the property tests cover arbitrary input and
// chunking; these pin each bound, each message and what stop() cuts off.
import { describe, expect, test } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  FrameDecoder,
  type FrameHeader,
  FrameType,
  INITIAL_WINDOW,
  ProtocolError,
} from "../../../lib/tunnel/yamux/index.ts";

type Seen = { header: FrameHeader; payload: Buffer | undefined };

function decoder(maxPayload = 1024, onFrame?: (d: FrameDecoder, seen: Seen[]) => void) {
  const seen: Seen[] = [];
  const d: FrameDecoder = new FrameDecoder(maxPayload, (header, payload) => {
    seen.push({ header, payload });
    onFrame?.(d, seen);
  });
  return { d, seen };
}

/** A copy in memory of its own: small Buffers share a pool, where `.buffer` would prove nothing. */
const own = (b: Buffer): Buffer => {
  const out = Buffer.alloc(b.length);
  b.copy(out);
  return out;
};

const thrown = (fn: () => unknown): Error => {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a throw");
};

describe("FrameDecoder bounds", () => {
  test("a data frame of exactly maxPayload is delivered; one byte more is refused, by its header alone", () => {
    const ok = decoder(16);
    ok.d.push(encodeDataFrame(0, 1, Buffer.alloc(16, 7)));
    expect(ok.seen[0]!.payload).toEqual(Buffer.alloc(16, 7));

    const err = thrown(() => decoder(16).d.push(encodeHeader(FrameType.Data, 0, 1, 17)));
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err.message).toBe("yamux protocol error: data frame of 17 bytes exceeds the largest window 16");
    expect((err as ProtocolError).code).toBe("ERR_YAMUX_PROTOCOL");
  });

  test("the bound is for data only: a window update or ping may carry any 32-bit length", () => {
    const { d, seen } = decoder(16);
    d.push(encodeHeader(FrameType.WindowUpdate, 0, 1, 0xffffffff));
    d.push(encodeHeader(FrameType.Ping, 0, 0, 17));
    expect(seen.map((s) => [s.header.type, s.header.length, s.payload])).toEqual([
      [FrameType.WindowUpdate, 0xffffffff, undefined],
      [FrameType.Ping, 17, undefined],
    ]);
  });

  test("GoAway is the last known type; every version but 0 is refused, with exact messages", () => {
    const { d, seen } = decoder();
    d.push(encodeHeader(FrameType.GoAway, 0, 0, 2));
    expect(seen[0]!.header.type).toBe(FrameType.GoAway);
    for (const [at, value, message] of [
      [1, 4, "yamux protocol error: unknown frame type 4"],
      [0, 1, "yamux protocol error: unsupported version 1"],
      [0, 255, "yamux protocol error: unsupported version 255"],
    ] as const) {
      const frame = encodeHeader(FrameType.Ping, 0, 0, 0);
      frame[at] = value;
      // Whole, and split so the header is read from the buffered path.
      expect(thrown(() => decoder().d.push(frame)).message).toBe(message);
      const split = decoder().d;
      split.push(frame.subarray(0, 5));
      expect(thrown(() => split.push(frame.subarray(5))).message).toBe(message);
    }
  });
});

describe("FrameDecoder payloads", () => {
  test("an empty data frame has no payload; a payload within one chunk is a view of it, not a copy", () => {
    const { d, seen } = decoder();
    const chunk = own(
      Buffer.concat([encodeDataFrame(4, 1, Buffer.alloc(0)), encodeDataFrame(0, 1, Buffer.from("abc"))]),
    );
    d.push(chunk);
    expect(seen[0]!.payload).toBeUndefined();
    expect(seen[0]!.header.flags).toBe(4);
    expect(seen[1]!.payload!.toString()).toBe("abc");
    expect(seen[1]!.payload!.buffer).toBe(chunk.buffer);
  });

  test("after a header split across chunks, a payload lying whole in the next chunk is still a view of it", () => {
    const frame = encodeDataFrame(0, 1, Buffer.from("payload"));
    // The payload ends the chunk exactly, or more bytes follow it.
    for (const tail of [Buffer.alloc(0), encodeHeader(FrameType.Ping, 0, 0, 1)]) {
      const { d, seen } = decoder();
      const second = own(Buffer.concat([frame.subarray(5), tail]));
      d.push(frame.subarray(0, 5));
      d.push(second);
      expect(seen[0]!.payload!.toString()).toBe("payload");
      expect(seen[0]!.payload!.buffer).toBe(second.buffer);
      expect(seen).toHaveLength(tail.length > 0 ? 2 : 1);
    }
  });

  test("a payload split across chunks arrives whole, and the frames after it in the last chunk too", () => {
    const { d, seen } = decoder();
    const wire = Buffer.concat([
      encodeDataFrame(0, 1, Buffer.from("hello world")),
      encodeHeader(FrameType.Ping, 0, 0, 9),
      encodeDataFrame(0, 3, Buffer.from("xy")),
    ]);
    // Cuts inside the header, inside the payload, and at a frame boundary plus one byte.
    for (const piece of [
      wire.subarray(0, 7),
      wire.subarray(7, 15),
      wire.subarray(15, 24),
      wire.subarray(24),
    ]) {
      d.push(piece);
    }
    expect(seen.map((s) => [s.header.streamId, s.payload?.toString() ?? s.header.length])).toEqual([
      [1, "hello world"],
      [0, 9],
      [3, "xy"],
    ]);
  });

  test("an empty chunk delivers nothing and changes nothing", () => {
    const { d, seen } = decoder();
    const frame = encodeDataFrame(0, 1, Buffer.from("ab"));
    d.push(frame.subarray(0, 3));
    d.push(Buffer.alloc(0));
    d.push(frame.subarray(3));
    expect(seen.map((s) => s.payload?.toString())).toEqual(["ab"]);
  });
});

describe("FrameDecoder.stop", () => {
  const three = Buffer.concat([
    encodeHeader(FrameType.Ping, 0, 0, 1),
    encodeHeader(FrameType.Ping, 0, 0, 2),
    encodeHeader(FrameType.Ping, 0, 0, 3),
  ]);

  test("stop() inside a frame handler delivers nothing more from the same chunk", () => {
    const { d, seen } = decoder(1024, (dec) => dec.stop());
    d.push(three);
    expect(seen).toHaveLength(1);
    d.push(encodeHeader(FrameType.Ping, 0, 0, 4));
    expect(seen).toHaveLength(1);
  });

  test("stop() inside a frame handler also holds when the frames were buffered across chunks", () => {
    const { d, seen } = decoder(1024, (dec) => dec.stop());
    d.push(three.subarray(0, 5));
    d.push(three.subarray(5));
    expect(seen).toHaveLength(1);
  });

  test("stop() drops what was buffered: later input is ignored, even garbage", () => {
    const { d, seen } = decoder();
    d.push(three.subarray(0, 5));
    d.stop();
    d.push(three.subarray(5));
    d.push(Buffer.from("not yamux at all"));
    expect(seen).toHaveLength(0);
  });
});

test("every stream starts with the protocol's 256 KiB window: both ends assume it without saying so", () => {
  expect(INITIAL_WINDOW).toBe(262_144);
});
