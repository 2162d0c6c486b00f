// openWithHeader against streams that misbehave in ways a yamux peer rarely does on cue: a stream
// that opens late, an opener that fails, a reply that does not decode. The happy paths and the
// peer-driven failures run over real yamux in stream-dispatcher.test.ts.
import { getEventListeners } from "node:events";
import { Duplex } from "node:stream";
import { describe, expect, test } from "vitest";
import { encodeFrame, HeaderError, Kind, openWithHeader } from "../../../lib/tunnel/header/index.ts";
import { closed } from "./support.ts";

/** A stream whose peer answers every write with `reply` (or never answers). */
function peer(reply?: Buffer): Duplex {
  const stream = new Duplex({
    read() {},
    write(_chunk, _encoding, callback) {
      if (reply) stream.push(reply);
      callback();
    },
  });
  return stream;
}

const header = { kind: Kind.KIND_GRPC };

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => new Error("expected openWithHeader to fail"),
    (e: unknown) => e,
  );
}

describe("openWithHeader", () => {
  test("a reply that does not decode fails as MALFORMED and destroys the stream", async () => {
    const stream = peer(encodeFrame(Buffer.from([0x12, 0xff])));
    const err = await failure(openWithHeader(async () => stream, header));
    expect(err).toBeInstanceOf(HeaderError);
    expect((err as HeaderError).code).toBe("MALFORMED");
    expect(stream.destroyed).toBe(true);
  });

  test("the deadline's error names the timeout", async () => {
    const stream = peer();
    const err = await failure(openWithHeader(async () => stream, header, { timeoutMs: 20 }));
    expect(err).toBeInstanceOf(HeaderError);
    expect((err as HeaderError).message).toBe("no reply to the stream header within 20 ms");
    await closed(stream, 5_000);
  });

  test("aborting while the stream is still opening rejects at once with the caller's reason", async () => {
    const ac = new AbortController();
    let opening!: AbortSignal;
    const pending = openWithHeader(
      (signal) => {
        opening = signal;
        return new Promise<Duplex>(() => {});
      },
      header,
      { signal: ac.signal, timeoutMs: 60_000 },
    );
    ac.abort(new Error("caller went away"));
    await expect(pending).rejects.toThrow("caller went away");
    expect(opening.aborted).toBe(true);
    expect(getEventListeners(opening, "abort")).toHaveLength(0);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  test("an abort that happens while open() runs is not missed", async () => {
    const ac = new AbortController();
    const pending = openWithHeader(
      () => {
        ac.abort(new Error("aborted during open"));
        return new Promise<Duplex>(() => {});
      },
      header,
      { signal: ac.signal, timeoutMs: 60_000 },
    );
    await expect(pending).rejects.toThrow("aborted during open");
  });

  test("a stream that opens after the caller gave up is destroyed, not leaked", async () => {
    const ac = new AbortController();
    let deliver!: (stream: Duplex) => void;
    const pending = openWithHeader(() => new Promise<Duplex>((resolve) => (deliver = resolve)), header, {
      signal: ac.signal,
    });
    ac.abort(new Error("gave up"));
    await expect(pending).rejects.toThrow("gave up");
    const late = peer();
    deliver(late);
    await closed(late, 5_000);
  });

  test("an opener that fails rejects with its own error at once, and leaves no listener behind", async () => {
    const ac = new AbortController();
    let opening!: AbortSignal;
    const err = await failure(
      openWithHeader(
        (signal) => {
          opening = signal;
          return Promise.reject(new Error("session closed"));
        },
        header,
        { signal: ac.signal, timeoutMs: 60_000 },
      ),
    );
    expect(err).toEqual(new Error("session closed"));
    expect(getEventListeners(opening, "abort")).toHaveLength(0);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  test("an accepted stream leaves no listener on the caller's signal or the deadline's", async () => {
    const ac = new AbortController();
    let opening!: AbortSignal;
    const stream = await openWithHeader(
      async (signal) => {
        opening = signal;
        return peer(encodeFrame(new Uint8Array(0)));
      },
      header,
      { signal: ac.signal },
    );
    expect(stream.destroyed).toBe(false);
    expect(getEventListeners(opening, "abort")).toHaveLength(0);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
    stream.destroy();
  });
});
