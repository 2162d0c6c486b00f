import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  FrameDecoder,
  FrameType,
  ProtocolError,
  readHeader,
} from "../../../lib/tunnel/yamux/index.ts";

const u32 = fc.integer({ min: 0, max: 0xffffffff });
const flags = fc.integer({ min: 0, max: 0xf });

/** Any valid frame: Data with a payload, or a control frame with an arbitrary length field. */
const frameArb = fc.oneof(
  fc.record({
    type: fc.constant(FrameType.Data),
    flags,
    streamId: u32,
    payload: fc.uint8Array({ maxLength: 300 }),
  }),
  fc.record({
    type: fc.constantFrom(FrameType.WindowUpdate, FrameType.Ping, FrameType.GoAway),
    flags,
    streamId: u32,
    length: u32,
  }),
);
type FrameSpec = typeof frameArb extends fc.Arbitrary<infer T> ? T : never;

function encode(f: FrameSpec): Buffer {
  return "payload" in f
    ? encodeDataFrame(f.flags, f.streamId, f.payload)
    : encodeHeader(f.type, f.flags, f.streamId, f.length);
}

function decodeAll(
  chunks: Buffer[],
): Array<{ type: number; flags: number; streamId: number; rest: unknown }> {
  const out: Array<{ type: number; flags: number; streamId: number; rest: unknown }> = [];
  const d = new FrameDecoder(1 << 20, (h, p) =>
    out.push({
      type: h.type,
      flags: h.flags,
      streamId: h.streamId,
      rest: h.type === FrameType.Data ? Buffer.from(p ?? []) : h.length,
    }),
  );
  for (const c of chunks) d.push(c);
  return out;
}

/** Cuts `buf` at the given points (sorted, deduplicated, within range). */
function cut(buf: Buffer, points: number[]): Buffer[] {
  const at = [...new Set(points.map((p) => p % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const p of [...at, buf.length]) {
    out.push(buf.subarray(prev, p));
    prev = p;
  }
  return out;
}

describe("FrameDecoder", () => {
  test("any chunking of any frame sequence decodes to the same frames", () => {
    fc.assert(
      fc.property(
        fc.array(frameArb, { maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 40 }),
        (frames, points) => {
          const wire = Buffer.concat(frames.map(encode));
          const expected = frames.map((f) => ({
            type: f.type,
            flags: f.flags,
            streamId: f.streamId,
            rest: "payload" in f ? Buffer.from(f.payload) : f.length,
          }));
          expect(decodeAll([wire])).toEqual(expected);
          expect(decodeAll(cut(wire, points))).toEqual(expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  test("one byte at a time decodes the same frames", () => {
    fc.assert(
      fc.property(fc.array(frameArb, { minLength: 1, maxLength: 8 }), (frames) => {
        const wire = Buffer.concat(frames.map(encode));
        const bytes = [...wire].map((b) => Buffer.from([b]));
        expect(decodeAll(bytes)).toEqual(decodeAll([wire]));
      }),
      { numRuns: 200 },
    );
  });

  test("header fields round-trip exactly", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3 }), flags, u32, u32, (type, f, id, len) => {
        const h = readHeader(encodeHeader(type as FrameType, f, id, len));
        expect(h).toEqual({ version: 0, type, flags: f, streamId: id, length: len });
      }),
    );
  });

  test("arbitrary bytes either decode or raise ProtocolError, nothing else", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (bytes, points) => {
          try {
            decodeAll(cut(Buffer.from(bytes), points));
          } catch (err) {
            expect(err).toBeInstanceOf(ProtocolError);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  test("a data frame longer than the bound is refused from its header alone", () => {
    const d = new FrameDecoder(1024, () => {});
    const header = encodeHeader(FrameType.Data, 0, 1, 1025);
    expect(() => d.push(header)).toThrow(/exceeds the largest window/);
  });

  test("unknown version and type are protocol errors", () => {
    const bad = encodeHeader(FrameType.Ping, 0, 0, 0);
    bad[0] = 1;
    expect(() => new FrameDecoder(1024, () => {}).push(bad)).toThrow(/unsupported version 1/);
    const badType = encodeHeader(FrameType.Ping, 0, 0, 0);
    badType[1] = 4;
    expect(() => new FrameDecoder(1024, () => {}).push(badType)).toThrow(/unknown frame type 4/);
  });
});
