// readFrame on a plain Node stream: each way a read can end before a whole frame, and what it
// leaves attached afterwards (a stream outlives its header; a leftover listener would outlive it too).
import { getEventListeners } from "node:events";
import { PassThrough } from "node:stream";
import { describe, expect, test } from "vitest";
import { HeaderError, readFrame } from "../../../lib/tunnel/header/index.ts";
import { readAll } from "./support.ts";

const frame = (body: number[]) => Buffer.from([0, 0, 0, body.length, ...body]);
const LISTENED = ["readable", "end", "close", "error"] as const;
const listeners = (stream: PassThrough) => LISTENED.map((e) => stream.listenerCount(e));

async function failure(promise: Promise<unknown>): Promise<HeaderError> {
  const err = await promise.then(
    () => new Error("expected readFrame to fail"),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HeaderError);
  return err as HeaderError;
}

describe("readFrame", () => {
  test("an already aborted signal fails at once with its reason, and nothing is read", async () => {
    const stream = new PassThrough();
    stream.write(frame([1]));
    const reason = new Error("caller left");
    await expect(readFrame(stream, { maxBytes: 16, signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(stream.readableLength).toBe(5);
    expect(listeners(stream)).toEqual([0, 0, 0, 0]);
  });

  test("a destroyed stream and an ended one fail as CLOSED before a frame is awaited", async () => {
    const destroyed = new PassThrough();
    destroyed.destroy();
    const a = await failure(readFrame(destroyed, { maxBytes: 16 }));
    expect(a.code).toBe("CLOSED");
    expect(a.message).toBe("stream closed before a frame arrived");

    const ended = new PassThrough({ autoDestroy: false });
    ended.end();
    ended.resume();
    await new Promise((resolve) => ended.once("end", resolve));
    expect(ended.destroyed).toBe(false);
    const b = await failure(readFrame(ended, { maxBytes: 16 }));
    expect(b.code).toBe("CLOSED");
    expect(b.message).toBe("stream closed before a frame arrived");
  });

  test("a stream that ends inside a frame fails as CLOSED, saying how far it got", async () => {
    const stream = new PassThrough({ autoDestroy: false });
    const reading = readFrame(stream, { maxBytes: 16 });
    stream.end(Buffer.from([0, 0, 0, 9, 1, 2]));
    const err = await failure(reading);
    expect(err.code).toBe("CLOSED");
    expect(err.message).toBe("stream ended after 6 bytes of a frame");
  });

  test("a stream closed inside a frame fails as CLOSED", async () => {
    const stream = new PassThrough();
    const reading = readFrame(stream, { maxBytes: 16 });
    stream.write(Buffer.from([0, 0]));
    await new Promise((resolve) => setImmediate(resolve));
    stream.destroy();
    const err = await failure(reading);
    expect(err.code).toBe("CLOSED");
    expect(err.message).toBe("stream closed after 2 bytes of a frame");
  });

  test("a stream that fails inside a frame fails as CLOSED with the stream's error as the cause", async () => {
    const stream = new PassThrough();
    const reading = readFrame(stream, { maxBytes: 16 });
    const cause = new Error("connection reset");
    stream.destroy(cause);
    const err = await failure(reading);
    expect(err.code).toBe("CLOSED");
    expect(err.message).toBe("stream failed while reading a frame: connection reset");
    expect(err.cause).toBe(cause);
  });

  test("once settled, readFrame leaves no listener on the stream or the signal", async () => {
    const ac = new AbortController();
    const ok = new PassThrough();
    const reading = readFrame(ok, { maxBytes: 16, signal: ac.signal, timeoutMs: 10_000 });
    ok.write(Buffer.concat([frame([7]), Buffer.from("payload")]));
    expect(await reading).toEqual(Buffer.from([7]));
    expect(listeners(ok)).toEqual([0, 0, 0, 0]);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);

    const aborted = new PassThrough();
    const failing = readFrame(aborted, { maxBytes: 16, signal: ac.signal });
    ac.abort(new Error("stop"));
    await expect(failing).rejects.toThrow("stop");
    expect(listeners(aborted)).toEqual([0, 0, 0, 0]);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  test("the bytes after the frame stay in the stream, and its end still reaches the next reader", async () => {
    for (const rest of ["", "payload"]) {
      const stream = new PassThrough();
      stream.end(Buffer.concat([frame([1, 2]), Buffer.from(rest)]));
      expect(await readFrame(stream, { maxBytes: 16 })).toEqual(Buffer.from([1, 2]));
      expect((await readAll(stream)).toString()).toBe(rest);
    }
  });
});
