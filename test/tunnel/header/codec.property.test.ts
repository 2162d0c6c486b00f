import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  decodeHeader,
  decodeReply,
  encodeFrame,
  encodeHeaderFrame,
  encodeRejectFrame,
  HeaderError,
  HeaderFrameDecoder,
  LENGTH_PREFIX_BYTES,
  type RejectCode,
  StreamHeader,
  type StreamHeaderInit,
} from "../../../lib/tunnel/header/index.ts";
import { metadataKeys } from "./support.ts";

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const text = fc.string({ unit: "grapheme", maxLength: 40 });
const headerArb: fc.Arbitrary<StreamHeaderInit> = fc.record({
  kind: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  agentId: fc.bigInt({ min: INT64_MIN, max: INT64_MAX }).map(String),
  service: text,
  metadata: fc.dictionary(metadataKeys(text), text, { maxKeys: 8 }),
});

/** Splits `data` at the given (sorted, deduplicated) cut points. */
function cut(data: Buffer, points: number[]): Buffer[] {
  const at = [...new Set(points.map((p) => p % (data.length + 1)))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const p of [...at, data.length]) {
    pieces.push(data.subarray(from, p));
    from = p;
  }
  return pieces;
}

/** Feeds pieces until the decoder settles; returns the outcome and the bytes it never looked at. */
function feed(decoder: HeaderFrameDecoder, pieces: Buffer[]) {
  for (let i = 0; i < pieces.length; i++) {
    const result = decoder.push(pieces[i]!);
    if (result.state !== "partial") return { result, unread: Buffer.concat(pieces.slice(i + 1)) };
  }
  return { result: { state: "partial" as const }, unread: Buffer.alloc(0) };
}

describe("stream header codec", () => {
  test("a header survives encode, frame decode and decode unchanged", () => {
    fc.assert(
      fc.property(headerArb, (init) => {
        const { result } = feed(new HeaderFrameDecoder(), [encodeHeaderFrame(init)]);
        expect(result.state).toBe("complete");
        if (result.state !== "complete") return;
        expect(result.rest.length).toBe(0);
        expect(decodeHeader(result.body)).toEqual(StreamHeader.fromPartial(init));
      }),
    );
  });

  test("any chunking of header + payload yields the same header and exactly the payload", () => {
    fc.assert(
      fc.property(
        headerArb,
        fc.uint8Array({ maxLength: 300 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        (init, payload, points) => {
          const wire = Buffer.concat([encodeHeaderFrame(init), payload]);
          const pieces = cut(wire, points);
          const { result, unread } = feed(new HeaderFrameDecoder(), pieces);
          expect(result.state).toBe("complete");
          if (result.state !== "complete") return;
          expect(decodeHeader(result.body)).toEqual(StreamHeader.fromPartial(init));
          expect(Buffer.concat([result.rest, unread])).toEqual(Buffer.from(payload));
        },
      ),
    );
  });

  test("arbitrary bytes never throw out of the parsers, only yield typed errors", () => {
    fc.assert(
      fc.property(
        // Raw noise, and noise behind a plausible length prefix so the message decoders see it too.
        fc.oneof(
          fc.uint8Array({ maxLength: 400 }),
          fc.uint8Array({ maxLength: 400 }).map((body) => new Uint8Array(encodeFrame(body))),
        ),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.integer({ min: 0, max: 512 }),
        (bytes, points, max) => {
          const decoder = new HeaderFrameDecoder(max);
          const { result } = feed(decoder, cut(Buffer.from(bytes), points));
          if (result.state === "error") {
            expect(result.error).toBeInstanceOf(HeaderError);
            expect(result.error.code).toBe("TOO_LARGE");
          }
          if (result.state === "partial")
            expect(decoder.bufferedBytes).toBeLessThanOrEqual(LENGTH_PREFIX_BYTES + max);
          // Whatever the body, the message decoders answer with a value or a HeaderError.
          const body = result.state === "complete" ? result.body : Buffer.from(bytes);
          const header = decodeHeader(body);
          if (header instanceof HeaderError) expect(header.code).toBe("MALFORMED");
          else expect(typeof header.kind).toBe("number");
          const reply = decodeReply(body);
          if (reply instanceof HeaderError) expect(reply.code).toBe("MALFORMED");
        },
      ),
    );
  });

  test("an oversized length is refused from the prefix alone, before its body is buffered", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 64 * 1024 }),
        fc.integer({ min: 1, max: 2 ** 32 - 1 }),
        fc.integer({ min: 1, max: 4 }),
        (max, excess, firstPiece) => {
          const length = Math.min(max + excess, 2 ** 32 - 1);
          const prefix = Buffer.alloc(LENGTH_PREFIX_BYTES);
          prefix.writeUInt32BE(length);
          const decoder = new HeaderFrameDecoder(max);
          const first = decoder.push(prefix.subarray(0, firstPiece));
          const second = firstPiece < LENGTH_PREFIX_BYTES ? decoder.push(prefix.subarray(firstPiece)) : first;
          if (firstPiece < LENGTH_PREFIX_BYTES) expect(first.state).toBe("partial");
          expect(second.state).toBe("error");
          if (second.state === "error") {
            expect(second.error.code).toBe("TOO_LARGE");
            expect(second.error.message).toContain(`${length} bytes`);
          }
          expect(decoder.bufferedBytes).toBe(0);
        },
      ),
    );
  });

  test("a reject frame decodes to its code and reason; an empty frame means accepted", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), text, (code, reason) => {
        const { result } = feed(new HeaderFrameDecoder(), [encodeRejectFrame(code as RejectCode, reason)]);
        expect(result.state).toBe("complete");
        if (result.state !== "complete") return;
        expect(decodeReply(result.body)).toEqual({ accepted: false, reject: { code, message: reason } });
      }),
    );
    const { result } = feed(new HeaderFrameDecoder(), [encodeFrame(new Uint8Array(0))]);
    expect(result.state === "complete" && decodeReply(result.body)).toEqual({ accepted: true });
  });

  test("any refusal reads as a refusal: one with code 0 and no reason goes out as INTERNAL, never as an empty (accepting) reply", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 8 }), fc.oneof(fc.constant(""), text), (code, reason) => {
        const { result } = feed(new HeaderFrameDecoder(), [encodeRejectFrame(code as RejectCode, reason)]);
        expect(result.state === "complete" && decodeReply(result.body)).toMatchObject({ accepted: false });
      }),
    );
  });

  test("a header no peer could accept fails at the opener", () => {
    expect(() => encodeHeaderFrame({ kind: 1, agentId: "12abc" })).toThrow(TypeError);
    expect(() => encodeHeaderFrame({ kind: 1, agentId: (2n ** 63n).toString() })).toThrow(TypeError);
  });
});
