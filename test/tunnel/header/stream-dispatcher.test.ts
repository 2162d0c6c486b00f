import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import type { Duplex } from "node:stream";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  type DispatchResult,
  decodeReply,
  encodeFrame,
  encodeHeaderFrame,
  HeaderError,
  Kind,
  openWithHeader,
  RejectCode,
  readFrame,
  StreamDispatcher,
  type StreamDispatcherOptions,
  type StreamHeader,
  type StreamHeaderInit,
  StreamRejectedError,
} from "../../../lib/tunnel/header/index.ts";
import type { Session, YamuxStream } from "../../../lib/tunnel/yamux/index.ts";
import { closed, metadataKeys, readAll, sessionPair } from "./support.ts";

interface Peer {
  name: string;
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

let pair: Awaited<ReturnType<typeof sessionPair>>;
beforeEach(async () => {
  pair = await sessionPair();
});
afterEach(() => pair.close());

/** Serves `session`'s inbound streams with a dispatcher; records results and the raw streams. */
function serve(
  session: Session,
  options: StreamDispatcherOptions<Peer> = {},
  peer: Peer = { name: "agent-1" },
) {
  const dispatcher = new StreamDispatcher<Peer>(options);
  const results: Promise<DispatchResult>[] = [];
  const streams: YamuxStream[] = [];
  session.on("stream", (stream) => {
    streams.push(stream);
    results.push(dispatcher.handle(stream, peer));
  });
  return { dispatcher, results, streams };
}

/** Echoes the payload back and half-closes when the opener does. */
function echo(stream: Duplex): void {
  stream.on("error", () => {});
  stream.pipe(stream);
}

const open = (session: Session) => () => session.open();

async function rejection(promise: Promise<unknown>): Promise<StreamRejectedError> {
  const err = await promise.then(
    () => new Error("expected the stream to be rejected"),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StreamRejectedError);
  return err as StreamRejectedError;
}

/** A raw opener: writes `bytes` itself and reads the acceptor's reply frame. */
async function rawOpen(session: Session, bytes: Buffer) {
  const stream = await session.open();
  stream.on("error", () => {});
  const reply = readFrame(stream, { maxBytes: 16 * 1024, timeoutMs: 10_000 });
  stream.write(bytes);
  return { stream, reply: decodeReply(await reply) };
}

describe("stream dispatch over yamux", () => {
  test("a known kind reaches its handler with header, ctx and payload intact, both ways", async () => {
    const { dispatcher } = serve(pair.server);
    const seen: { header: StreamHeader; peer: Peer }[] = [];
    dispatcher.register(Kind.KIND_GRPC, (stream, header, peer) => {
      seen.push({ header, peer });
      // The acceptor speaks first: these bytes follow the accept frame, maybe in the same chunk.
      stream.write("hello\n");
      readAll(stream).then((payload) => stream.end(`${payload.length}:${sha256(payload)}`));
    });

    const header: StreamHeaderInit = {
      kind: Kind.KIND_GRPC,
      agentId: "9007199254740993", // beyond 2^53: must survive as a string
      service: "gitlab.agent.kubernetes_api.rpc.KubernetesApi",
      metadata: { "x-correlation-id": "abc" },
    };
    const stream = await openWithHeader(open(pair.client), header);
    const payload = randomBytes(1024 * 1024 + 7);
    const reply = readAll(stream);
    stream.end(payload);

    expect((await reply).toString()).toBe(`hello\n${payload.length}:${sha256(payload)}`);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.header).toEqual({ ...header, kind: Kind.KIND_GRPC });
    expect(seen[0]!.peer).toEqual({ name: "agent-1" });
  });

  test("payload sent in the same write as the header reaches the handler intact", async () => {
    const { dispatcher } = serve(pair.server);
    dispatcher.register(Kind.KIND_HTTP, echo);
    const payload = Buffer.from("GET /api HTTP/1.1\r\nHost: x\r\n\r\n");
    const { stream, reply } = await rawOpen(
      pair.client,
      Buffer.concat([encodeHeaderFrame({ kind: Kind.KIND_HTTP }), payload]),
    );
    expect(reply).toEqual({ accepted: true });
    stream.end();
    expect(await readAll(stream)).toEqual(payload);
  });

  test("a stream with nothing after the header still ends for its new owner, on both sides", async () => {
    const { dispatcher } = serve(pair.server);
    const handlerSaw: Promise<Buffer>[] = [];
    dispatcher.register(Kind.KIND_HTTP, (stream) => {
      handlerSaw.push(readAll(stream));
      stream.end(); // no payload back either
    });
    // Header and FIN in one go: the acceptor must not swallow the end of the stream.
    const { stream } = await rawOpen(pair.client, encodeHeaderFrame({ kind: Kind.KIND_HTTP }));
    stream.end();
    expect(await readAll(stream)).toEqual(Buffer.alloc(0));
    expect(await handlerSaw[0]!).toEqual(Buffer.alloc(0));

    const opened = await openWithHeader(open(pair.client), { kind: Kind.KIND_HTTP });
    // The accept frame and FIN arrive together; the opener still sees the end.
    expect(await readAll(opened)).toEqual(Buffer.alloc(0));
  });

  test("any chunking of header + payload on a real stream gives the handler the same header and payload", async () => {
    const { dispatcher } = serve(pair.server);
    const received: Promise<{ header: StreamHeader; payload: Buffer }>[] = [];
    dispatcher.register(Kind.KIND_HTTP, (stream, header) => {
      received.push(readAll(stream).then((payload) => ({ header, payload })));
      stream.end();
    });
    await fc.assert(
      fc.asyncProperty(
        fc.string({ maxLength: 30 }),
        fc.dictionary(metadataKeys(fc.string({ maxLength: 10 })), fc.string({ maxLength: 10 }), {
          maxKeys: 4,
        }),
        fc.uint8Array({ maxLength: 2000 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 20 }),
        async (service, metadata, payload, sizes) => {
          const wire = Buffer.concat([
            encodeHeaderFrame({ kind: Kind.KIND_HTTP, service, metadata }),
            payload,
          ]);
          const stream = await pair.client.open();
          stream.on("error", () => {});
          let at = 0;
          for (let i = 0; at < wire.length; i++) {
            const n = sizes[i % sizes.length]!;
            stream.write(wire.subarray(at, at + n));
            at += n;
            // Let some pieces travel on their own.
            if (i % 3 === 0) await new Promise((r) => setImmediate(r));
          }
          stream.end();
          await readAll(stream);
          const got = await received.at(-1)!;
          expect(got.header.service).toBe(service);
          expect(got.header.metadata).toEqual({ ...metadata });
          expect(got.payload).toEqual(Buffer.from(payload));
        },
      ),
      { numRuns: 40 },
    );
  });

  test("an unknown or unspecified kind is refused with a readable reason", async () => {
    const { dispatcher, results } = serve(pair.server);
    dispatcher.register(Kind.KIND_GRPC, echo);

    const unknown = await rejection(openWithHeader(open(pair.client), { kind: 7 as Kind }));
    expect(unknown.code).toBe(RejectCode.REJECT_CODE_UNKNOWN_KIND);
    expect(unknown.reason).toBe("no handler for stream kind 7");
    expect(unknown.message).toBe("stream rejected (UNKNOWN_KIND): no handler for stream kind 7");

    const http = await rejection(openWithHeader(open(pair.client), { kind: Kind.KIND_HTTP }));
    expect(http.reason).toBe("no handler for stream kind HTTP");

    const unspecified = await rejection(openWithHeader(open(pair.client), { kind: Kind.KIND_UNSPECIFIED }));
    expect(unspecified.code).toBe(RejectCode.REJECT_CODE_UNKNOWN_KIND);

    const outcomes = await Promise.all(results);
    expect(outcomes.map((r) => r.accepted)).toEqual([false, false, false]);
  });

  test("a malformed header is refused with BAD_HEADER", async () => {
    const { dispatcher } = serve(pair.server);
    dispatcher.register(Kind.KIND_GRPC, echo);
    // The frame is well formed, its body is not a StreamHeader (field 1 as a truncated string).
    const garbled = async () => {
      const stream = await pair.client.open();
      stream.write(encodeFrame(Uint8Array.from([0x0a, 0xff])));
      return stream;
    };
    const err = await rejection(openWithHeader(garbled, { kind: Kind.KIND_GRPC }));
    expect(err.code).toBe(RejectCode.REJECT_CODE_BAD_HEADER);
    expect(err.reason).toMatch(/^stream header does not decode: /);
  });

  test("an oversized header is refused from its length prefix, long before the deadline", async () => {
    const { dispatcher } = serve(pair.server, { maxHeaderBytes: 16 * 1024, headerTimeoutMs: 30_000 });
    dispatcher.register(Kind.KIND_GRPC, echo);
    const big = { kind: Kind.KIND_GRPC, metadata: { blob: "x".repeat(20_000) } };
    const err = await rejection(openWithHeader(open(pair.client), big));
    expect(err.code).toBe(RejectCode.REJECT_CODE_BAD_HEADER);
    expect(err.reason).toMatch(/^stream header: frame of 200\d\d bytes exceeds the 16384-byte limit$/);

    // A peer speaking another protocol announces an absurd length and is refused at once.
    const { reply } = await rawOpen(pair.client, Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    expect(reply).toMatchObject({ accepted: false, reject: { code: RejectCode.REJECT_CODE_BAD_HEADER } });
  });

  test("a header that never completes is refused at the deadline, then the stream is closed", async () => {
    const { streams } = serve(pair.server, { headerTimeoutMs: 300, rejectLingerMs: 300 });
    const started = performance.now();
    const { stream, reply } = await rawOpen(pair.client, Buffer.from([0, 0, 0])); // a slowloris stops here
    const elapsed = performance.now() - started;
    expect(reply).toEqual({
      accepted: false,
      reject: {
        code: RejectCode.REJECT_CODE_DEADLINE_EXCEEDED,
        message: "stream header: no whole frame within 300 ms",
      },
    });
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(5_000);
    // The opener keeps its side open; the acceptor cuts it off once the linger is over.
    await closed(stream, 5_000);
    await closed(streams[0]!, 5_000);
  });

  test("an opener that half-closes right behind its header still reads the reason", async () => {
    const { streams } = serve(pair.server, { rejectLingerMs: 60_000 });
    const stream = await pair.client.open();
    stream.on("error", () => {});
    stream.end(encodeHeaderFrame({ kind: Kind.KIND_GRPC }));
    const reply = decodeReply(await readFrame(stream, { maxBytes: 1024, timeoutMs: 5_000 }));
    expect(reply).toMatchObject({ accepted: false, reject: { code: RejectCode.REJECT_CODE_UNKNOWN_KIND } });
    // Both sides have ended: the acceptor's stream closes without waiting for the linger.
    await closed(streams[0]!, 5_000);
  });

  test("a refused stream is closed as soon as the opener has read the reason", async () => {
    const { streams } = serve(pair.server, { rejectLingerMs: 60_000 });
    await rejection(openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC }));
    await closed(streams[0]!, 5_000);
    expect(pair.server.stats.openStreams).toBe(0);
  });

  test("after rejections the session and its other streams keep working", async () => {
    const { dispatcher, streams } = serve(pair.server, { headerTimeoutMs: 200, rejectLingerMs: 200 });
    dispatcher.register(Kind.KIND_GRPC, echo);
    const longLived = await openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC });
    longLived.write("before;");

    await rejection(openWithHeader(open(pair.client), { kind: Kind.KIND_HTTP }));
    await rejection(openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC, service: "x".repeat(17_000) }));
    const garbled = async () => {
      const s = await pair.client.open();
      s.write(encodeFrame(Buffer.from([0xff])));
      return s;
    };
    await rejection(openWithHeader(garbled, { kind: Kind.KIND_GRPC }));
    const slow = await rawOpen(pair.client, Buffer.from([0]));
    expect(slow.reply).toMatchObject({ reject: { code: RejectCode.REJECT_CODE_DEADLINE_EXCEEDED } });
    await Promise.all(streams.slice(1).map((s) => closed(s, 5_000)));

    const fresh = await openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC });
    fresh.end("fresh");
    expect((await readAll(fresh)).toString()).toBe("fresh");
    longLived.end("after");
    expect((await readAll(longLived)).toString()).toBe("before;after");
    expect(pair.client.stats.openStreams).toBeLessThanOrEqual(1);
  });

  test("admit refuses with its own code and reason; a failing admit refuses with INTERNAL", async () => {
    const { dispatcher } = serve(pair.server);
    dispatcher.register(Kind.KIND_HTTP, echo, {
      admit: async (header, peer) => {
        if (header.service === "boom") throw new Error("secret stack detail");
        if (header.service !== "prometheus") {
          throw new StreamRejectedError(
            RejectCode.REJECT_CODE_NOT_FOUND,
            `${peer.name} serves no "${header.service}"`,
          );
        }
      },
    });
    const notFound = await rejection(
      openWithHeader(open(pair.client), { kind: Kind.KIND_HTTP, service: "redis" }),
    );
    expect(notFound.code).toBe(RejectCode.REJECT_CODE_NOT_FOUND);
    expect(notFound.reason).toBe('agent-1 serves no "redis"');

    const internal = await rejection(
      openWithHeader(open(pair.client), { kind: Kind.KIND_HTTP, service: "boom" }),
    );
    expect(internal.code).toBe(RejectCode.REJECT_CODE_INTERNAL);
    expect(internal.reason).toBe("the accepting side failed to admit the stream");

    const ok = await openWithHeader(open(pair.client), { kind: Kind.KIND_HTTP, service: "prometheus" });
    ok.end("up");
    expect((await readAll(ok)).toString()).toBe("up");
  });

  test("either end can open: the server side opens toward a dispatcher on the client side", async () => {
    const { dispatcher } = serve(pair.client, {}, { name: "kas-replica-a" });
    let peer: Peer | undefined;
    dispatcher.register(Kind.KIND_GRPC, (stream, _header, ctx) => {
      peer = ctx;
      echo(stream);
    });
    const stream = await openWithHeader(open(pair.server), { kind: Kind.KIND_GRPC });
    stream.end("reverse");
    expect((await readAll(stream)).toString()).toBe("reverse");
    expect(peer).toEqual({ name: "kas-replica-a" });
  });

  test("the opener gives up at its deadline when no reply comes, and resets the stream", async () => {
    const held: YamuxStream[] = [];
    pair.server.on("stream", (s) => {
      s.on("error", () => {});
      held.push(s);
    });
    const started = performance.now();
    const err = await openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC }, { timeoutMs: 200 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(HeaderError);
    expect((err as HeaderError).code).toBe("TIMEOUT");
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    await closed(held[0]!, 5_000);
  });

  test("aborting the signal rejects with its reason and resets the stream", async () => {
    const held: YamuxStream[] = [];
    pair.server.on("stream", (s) => {
      s.on("error", () => {});
      held.push(s);
    });
    const ac = new AbortController();
    const opening = openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC }, { signal: ac.signal });
    await once(pair.server, "stream");
    ac.abort(new Error("caller went away"));
    await expect(opening).rejects.toThrow("caller went away");
    await closed(held[0]!, 5_000);
    await expect(openWithHeader(open(pair.client), { kind: 1 }, { signal: ac.signal })).rejects.toThrow(
      "caller went away",
    );
  });

  test("a stream reset while its header is pending ends quietly", async () => {
    const { results } = serve(pair.server);
    const stream = await pair.client.open();
    stream.write(Buffer.from([0, 0]));
    await once(pair.server, "stream");
    stream.destroy();
    const result = await results[0]!;
    expect(result.accepted).toBe(false);
    expect(!result.accepted && result.error).toBeInstanceOf(HeaderError);
    expect(!result.accepted && (result.error as HeaderError).code).toBe("CLOSED");
  });

  test("a handler that throws loses its stream, not the dispatcher", async () => {
    const { dispatcher, results, streams } = serve(pair.server);
    dispatcher.register(Kind.KIND_GRPC, () => {
      throw new Error("handler bug");
    });
    // The reset may overtake the accept frame in the opener's buffers: either outcome is a closed stream.
    const opened = await openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC }).catch((e: unknown) => e);
    const result = await results[0]!;
    expect(result).toMatchObject({ accepted: true, handlerError: new Error("handler bug") });
    await closed(streams[0]!, 5_000);
    if (opened instanceof HeaderError) expect(opened.code).toBe("CLOSED");
    else {
      (opened as Duplex).on("error", () => {});
      await closed(opened as Duplex, 5_000);
    }
  });

  test("a handler's failure, thrown or rejected, reaches onHandlerError with its header and peer", async () => {
    const reported: Array<{ error: unknown; kind: Kind; peer: Peer }> = [];
    const { dispatcher, results, streams } = serve(pair.server, {
      onHandlerError: (error, header, peer) => reported.push({ error, kind: header.kind, peer }),
    });
    dispatcher.register(Kind.KIND_GRPC, () => {
      throw new Error("sync bug");
    });
    dispatcher.register(Kind.KIND_HTTP, async () => {
      await Promise.resolve();
      throw new Error("async bug");
    });
    await openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC }).catch(() => {});
    await openWithHeader(open(pair.client), { kind: Kind.KIND_HTTP })
      .then((s) => s.on("error", () => {}))
      .catch(() => {});
    await Promise.all(results);
    await closed(streams[1]!, 5_000);
    expect(reported).toEqual([
      { error: new Error("sync bug"), kind: Kind.KIND_GRPC, peer: { name: "agent-1" } },
      { error: new Error("async bug"), kind: Kind.KIND_HTTP, peer: { name: "agent-1" } },
    ]);
    expect(streams[1]!.destroyed).toBe(true);
  });

  test("registration refuses UNSPECIFIED and duplicates", () => {
    const dispatcher = new StreamDispatcher();
    dispatcher.register(Kind.KIND_GRPC, echo);
    expect(() => dispatcher.register(Kind.KIND_GRPC, echo)).toThrow(/already registered/);
    expect(() => dispatcher.register(Kind.KIND_UNSPECIFIED, echo)).toThrow(
      new TypeError("cannot register a handler for UNSPECIFIED"),
    );
    expect(() => dispatcher.register(Kind.UNRECOGNIZED, echo)).toThrow(TypeError);
  });

  test("an accepted stream resolves with its header, and its errors are the handler's from then on", async () => {
    const { dispatcher, results } = serve(pair.server);
    const errorListeners: number[] = [];
    dispatcher.register(Kind.KIND_GRPC, (stream) => {
      errorListeners.push(stream.listenerCount("error"));
      echo(stream);
    });
    const stream = await openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC, service: "s" });
    stream.end();
    expect(await results[0]!).toEqual({
      accepted: true,
      header: { kind: Kind.KIND_GRPC, agentId: "0", service: "s", metadata: {} },
    });
    // The dispatcher's absorbing listener is gone: an error nobody handles is the handler's bug to see.
    expect(errorListeners).toEqual([0]);
  });

  test("maxHeaderBytes is the limit the dispatcher applies", async () => {
    const { dispatcher } = serve(pair.server, { maxHeaderBytes: 8 });
    dispatcher.register(Kind.KIND_GRPC, echo);
    const refused = await rejection(
      openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC, service: "a-service-name" }),
    );
    expect(refused.code).toBe(RejectCode.REJECT_CODE_BAD_HEADER);
    expect(refused.reason).toMatch(/exceeds the 8-byte limit/);
  });

  test("a stream that closes while admit runs is not handed to the handler", async () => {
    const { dispatcher, results, streams } = serve(pair.server);
    let handled = false;
    dispatcher.register(
      Kind.KIND_GRPC,
      () => {
        handled = true;
      },
      { admit: () => void streams[0]!.destroy() },
    );
    await openWithHeader(open(pair.client), { kind: Kind.KIND_GRPC }).catch(() => {});
    const result = await results[0]!;
    expect(result.accepted).toBe(false);
    expect(!result.accepted && result.error).toEqual(
      new HeaderError("CLOSED", "stream closed while it was being admitted"),
    );
    expect(handled).toBe(false);
  });
});
