import { Duplex } from "node:stream";
import fc from "fast-check";
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  encodeDataFrame,
  encodeHeader,
  Flag,
  FrameDecoder,
  type FrameHeader,
  FrameType,
  GoAwayCode,
  ProtocolError,
  Session,
} from "../../../lib/tunnel/yamux/index.ts";
import { echo, randomBytes, type SessionPair, sessionPair, sha256, sha256Of } from "./harness.ts";

/** The fuzzed session's connection: input is pushed by the test, output is captured. */
class CaptureConn extends Duplex {
  readonly written: Buffer[] = [];
  override _read(): void {}
  override _write(chunk: Buffer, _e: BufferEncoding, cb: () => void): void {
    this.written.push(chunk);
    cb();
  }
  frames(): FrameHeader[] {
    const out: FrameHeader[] = [];
    new FrameDecoder(1 << 30, (h) => out.push(h)).push(Buffer.concat(this.written));
    return out;
  }
}

const id = fc.oneof(fc.constantFrom(0, 1, 2, 3, 4, 5, 6), fc.integer({ min: 0, max: 0xffffffff }));
const validish = fc.oneof(
  fc
    .record({ flags: fc.integer({ min: 0, max: 15 }), id, data: fc.uint8Array({ maxLength: 64 }) })
    .map((f) => encodeDataFrame(f.flags, f.id, f.data)),
  fc
    .record({ type: fc.constantFrom(1, 2, 3), flags: fc.integer({ min: 0, max: 15 }), id, len: fc.nat() })
    .map((f) => encodeHeader(f.type as FrameType, f.flags, f.id, f.len)),
  fc.constant(encodeHeader(FrameType.WindowUpdate, Flag.SYN, 2, 0)),
  fc.constant(encodeHeader(FrameType.Ping, Flag.SYN, 0, 7)),
);
const mutated = fc
  .tuple(
    fc.array(validish, { minLength: 1, maxLength: 6 }),
    fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 4 }),
  )
  .map(([frames, flips]) => {
    const buf = Buffer.concat(frames);
    for (const [at, v] of flips) buf[at % buf.length] = v;
    return buf;
  });
const random = fc.uint8Array({ minLength: 1, maxLength: 256 }).map((b) => Buffer.from(b));

let healthy: SessionPair;
beforeAll(async () => {
  healthy = await sessionPair();
  echo(healthy.server);
});
afterAll(() => healthy.close());

test("10,000 random and mutated inputs: no exception escapes, protocol errors end in GoAway(protocol error)", async () => {
  // A stream on a healthy session stays open across the whole fuzz run.
  const bystander = await healthy.client.open();
  const before = randomBytes(100_000);
  bystander.write(before);

  let protocolErrors = 0;
  // An explicit loop rather than fc.assert so each input can await its session's I/O.
  const inputs = fc.sample(fc.oneof(random, mutated), { numRuns: 10_000, seed: 20261122 });
  for (const input of inputs) {
    const conn = new CaptureConn();
    const session = new Session(conn, { client: true, keepAliveIntervalMs: 0, maxStreamWindow: 1 << 20 });
    session.on("stream", (s) => {
      s.on("error", () => {});
      s.resume();
    });
    let closeErr: Error | undefined;
    session.on("close", (err) => {
      closeErr = err;
    });
    conn.push(input);
    await new Promise((r) => setImmediate(r)); // let queued frames flush
    if (closeErr instanceof ProtocolError) {
      protocolErrors++;
      const last = conn.frames().at(-1);
      expect(last?.type).toBe(FrameType.GoAway);
      expect(last?.length).toBe(GoAwayCode.ProtocolError);
    }
    session.destroy();
  }
  expect(protocolErrors).toBeGreaterThan(1000);

  const after = randomBytes(100_000);
  bystander.end(after);
  const got = await sha256Of(bystander);
  expect(got.hex).toBe(sha256(Buffer.concat([before, after])));
}, 120_000);
