// The codec's checks one by one, with the inputs that sit right at each rule's edge: the property
// tests cover arbitrary input, these pin what each rule accepts and what it says when it refuses.
import { describe, expect, test } from "vitest";
import {
  decodeHeader,
  decodeReply,
  encodeHeaderFrame,
  encodeRejectFrame,
  HeaderError,
  HeaderFrameDecoder,
  Kind,
  kindName,
  LENGTH_PREFIX_BYTES,
  MAX_REJECT_REASON,
  RejectCode,
  rejectCodeName,
  StreamHeader,
  StreamRejectedError,
} from "../../../lib/tunnel/header/index.ts";

const bodyOf = (frame: Buffer) => frame.subarray(LENGTH_PREFIX_BYTES);
const thrown = (fn: () => unknown): Error => {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a throw");
};

describe("agentId", () => {
  test("only a plain decimal int64 encodes: protobuf's own parsing would take hex, padding and leading zeros", () => {
    // Each of these converts with BigInt() and would go out as some other number than the text says.
    for (const agentId of ["0x10", " 12", "12 ", "012", "-0x1", "+5", "1_000"]) {
      const err = thrown(() => encodeHeaderFrame({ kind: Kind.KIND_GRPC, agentId }));
      expect(err).toBeInstanceOf(TypeError);
      expect(err.message).toBe(`agentId must be a decimal int64, got ${agentId}`);
    }
    for (const agentId of ["0", "-1", "12", "9223372036854775807", "-9223372036854775808"]) {
      const body = bodyOf(encodeHeaderFrame({ kind: Kind.KIND_GRPC, agentId }));
      expect(StreamHeader.decode(body).agentId).toBe(agentId);
    }
  });

  test("a decimal beyond int64 is refused with the encoder's reason and its error as the cause", () => {
    const err = thrown(() => encodeHeaderFrame({ kind: Kind.KIND_GRPC, agentId: "9999999999999999999" }));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.message).toMatch(/^stream header does not encode: .*9999999999999999999/);
    expect(err.cause).toBeInstanceOf(Error);
  });
});

describe("decoding", () => {
  test("a header that does not decode says so, with the protobuf error as its cause", () => {
    const err = decodeHeader(Buffer.from([0x0a, 0xff]));
    expect(err).toBeInstanceOf(HeaderError);
    expect((err as HeaderError).code).toBe("MALFORMED");
    expect((err as HeaderError).message).toMatch(/^stream header does not decode: \S/);
    expect((err as HeaderError).cause).toBeInstanceOf(Error);
  });

  test("a reply that does not decode says so, with the protobuf error as its cause", () => {
    const err = decodeReply(Buffer.from([0x12, 0xff]));
    expect(err).toBeInstanceOf(HeaderError);
    expect((err as HeaderError).code).toBe("MALFORMED");
    expect((err as HeaderError).message).toMatch(/^stream reply does not decode: \S/);
    expect((err as HeaderError).cause).toBeInstanceOf(Error);
  });
});

describe("reject frames", () => {
  const sent = (code: RejectCode, reason: string) => {
    const reply = decodeReply(bodyOf(encodeRejectFrame(code, reason)));
    if (reply instanceof HeaderError || reply.accepted) throw new Error("expected a refusal");
    return reply.reject;
  };

  test("a reason up to the limit goes out whole; a longer one is cut at the limit and marked", () => {
    const exact = "r".repeat(MAX_REJECT_REASON);
    expect(sent(RejectCode.REJECT_CODE_NOT_FOUND, exact).message).toBe(exact);
    const long = `${"r".repeat(MAX_REJECT_REASON)}tail`;
    expect(sent(RejectCode.REJECT_CODE_NOT_FOUND, long).message).toBe(`${exact}…`);
  });

  test("code 0 with a reason keeps code 0: only a refusal with nothing in it becomes INTERNAL", () => {
    expect(sent(RejectCode.REJECT_CODE_UNSPECIFIED, "why")).toEqual({ code: 0, message: "why" });
    expect(sent(RejectCode.REJECT_CODE_UNSPECIFIED, "").code).toBe(RejectCode.REJECT_CODE_INTERNAL);
  });
});

describe("names", () => {
  test("kinds and reject codes print without their prefix; unknown numbers print as numbers", () => {
    expect(kindName(Kind.KIND_GRPC)).toBe("GRPC");
    expect(kindName(999 as Kind)).toBe("999");
    expect(rejectCodeName(RejectCode.REJECT_CODE_NOT_FOUND)).toBe("NOT_FOUND");
    expect(rejectCodeName(999 as RejectCode)).toBe("code 999");
  });

  test("errors carry their class name, code and the reason as sent", () => {
    const header = new HeaderError("CLOSED", "gone");
    expect(header.name).toBe("HeaderError");
    expect(String(header)).toBe("HeaderError: gone");
    const rejected = new StreamRejectedError(RejectCode.REJECT_CODE_UNKNOWN_KIND, "no such kind");
    expect(rejected.name).toBe("StreamRejectedError");
    expect(rejected.code).toBe(RejectCode.REJECT_CODE_UNKNOWN_KIND);
    expect(rejected.reason).toBe("no such kind");
    expect(rejected.message).toBe("stream rejected (UNKNOWN_KIND): no such kind");
    expect(new StreamRejectedError(77 as RejectCode, "x").message).toBe("stream rejected (code 77): x");
  });
});

describe("HeaderFrameDecoder", () => {
  const frame = (body: number[]) => Buffer.from([0, 0, 0, body.length, ...body]);

  test("bytesWanted counts down what the current stage still needs, and is 0 once settled", () => {
    const decoder = new HeaderFrameDecoder();
    expect(decoder.bytesWanted).toBe(4);
    decoder.push(Buffer.from([0, 0]));
    expect(decoder.bytesWanted).toBe(2);
    decoder.push(Buffer.from([0, 3, 7]));
    expect(decoder.bytesWanted).toBe(2);
    expect(decoder.bufferedBytes).toBe(5);
    const done = decoder.push(Buffer.from([8, 9, 10]));
    expect(done).toMatchObject({ state: "complete", body: Buffer.from([7, 8, 9]), rest: Buffer.from([10]) });
    expect(decoder.bytesWanted).toBe(0);
    expect(decoder.bufferedBytes).toBe(0);
  });

  test("a settled decoder refuses more input, after a frame and after a failure", () => {
    const complete = new HeaderFrameDecoder();
    expect(complete.push(frame([1])).state).toBe("complete");
    expect(() => complete.push(Buffer.from([1]))).toThrow(
      "HeaderFrameDecoder: push after the frame completed or failed",
    );
    const failed = new HeaderFrameDecoder(2);
    expect(failed.push(frame([1, 2, 3])).state).toBe("error");
    expect(failed.bytesWanted).toBe(0);
    expect(() => failed.push(Buffer.from([1]))).toThrow(/push after the frame completed or failed/);
  });

  test("a body of exactly maxBodyBytes is accepted; one byte more is TOO_LARGE", () => {
    expect(new HeaderFrameDecoder(3).push(frame([1, 2, 3]))).toMatchObject({
      state: "complete",
      body: Buffer.from([1, 2, 3]),
    });
    const result = new HeaderFrameDecoder(2).push(frame([1, 2, 3]));
    expect(result.state).toBe("error");
    if (result.state !== "error") return;
    expect(result.error.code).toBe("TOO_LARGE");
    expect(result.error.message).toBe("frame of 3 bytes exceeds the 2-byte limit");
  });

  test("an empty chunk changes nothing", () => {
    const decoder = new HeaderFrameDecoder();
    expect(decoder.push(Buffer.alloc(0))).toEqual({ state: "partial" });
    expect(decoder.push(frame([5]))).toMatchObject({ state: "complete", body: Buffer.from([5]) });
  });
});
