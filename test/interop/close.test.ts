import { afterEach, beforeAll, describe, expect, test } from "vitest";
import { Session, type YamuxStream } from "../../lib/tunnel/yamux/index.ts";
import { buildGoPeer } from "./go-build.ts";
import { killGoPeers, startGoPeer } from "./go-peer.ts";
import {
  deadline,
  digestOf,
  randomBytes,
  readAll,
  sessionFailure,
  sha256,
  streamError,
  writeInPieces,
} from "./streams.ts";

// Half-close (FIN) and reset (RST) against hashicorp/yamux, each direction.

const KiB = 1024;
const MiB = 1024 * KiB;

beforeAll(() => buildGoPeer(), 180_000);
afterEach(() => killGoPeers());

describe("half-close", () => {
  test("we end our side; the reference reads to EOF and only then answers on the same stream", async () => {
    const { peer, socket } = await startGoPeer("digest-server");
    const s = new Session(socket, { client: true });
    const failed = sessionFailure(s);
    const data = randomBytes(1 * MiB);

    const st = await s.open();
    await deadline(Promise.race([writeInPieces(st, data), failed]), 20_000, "write and end");
    const reply = await deadline(Promise.race([readAll(st), failed]), 20_000, "the reply after our FIN");

    expect(reply.toString()).toBe(sha256(data));
    expect(await peer.waitFor("digest")).toMatchObject({
      id: st.id,
      bytes: data.length,
      sha256: sha256(data),
      err: "",
    });
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });

  test("the reference ends its side first; we read to the end, then answer and end", async () => {
    const { peer, socket } = await startGoPeer("half-close-client", { size: 1 * MiB });
    const s = new Session(socket, { client: false });
    const failed = sessionFailure(s);
    const received: number[] = [];
    s.on("stream", async (st: YamuxStream) => {
      const got = await readAll(st); // resolves only on the reference's FIN
      received.push(got.length);
      st.end(sha256(got));
    });

    const result = await Promise.race([peer.waitFor("half-close"), failed]);

    expect(received).toEqual([1 * MiB]);
    expect(result).toMatchObject({ ok: true, closedByPeer: true, writeErr: "", readErr: "" });
    expect(await peer.waitExit()).toBe(0);
  });
});

describe("reset", () => {
  test("our destroy() resets the stream at the reference; a FIN'd stream next to it ends normally", async () => {
    const { peer, socket } = await startGoPeer("expect-reset");
    const s = new Session(socket, { client: true });
    const failed = sessionFailure(s);

    const a = await s.open();
    a.on("error", () => {});
    a.write(randomBytes(64 * KiB));
    await Promise.race([peer.waitFor("reading", (e) => e.id === a.id), failed]);
    a.destroy();
    const reset = await peer.waitFor("stream-error", (e) => e.id === a.id);
    expect(reset).toMatchObject({ reset: true, err: "connection reset", writeErr: "connection reset" });

    const b = await s.open();
    b.end("bye");
    const ended = await peer.waitFor("stream-error", (e) => e.id === b.id);
    expect(ended).toMatchObject({ reset: false, err: "EOF", bytes: 3 });
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });

  test("our destroy() of an inbound stream resets it at the reference client", async () => {
    const { peer, socket } = await startGoPeer("reset-client", { size: 64 * KiB });
    const s = new Session(socket, { client: false });
    s.on("stream", (st: YamuxStream) => {
      st.on("error", () => {});
      st.once("data", () => st.destroy());
    });

    const result = await peer.waitFor("stream-error");

    expect(result).toMatchObject({ reset: true, err: "connection reset" });
    expect(await peer.waitExit()).toBe(0);
  });

  test("an RST from the reference on an established stream fails it with ECONNRESET; the session goes on", async () => {
    const { peer, socket } = await startGoPeer("reset-first", { "reset-after": 100_000 });
    const s = new Session(socket, { client: true });
    const failed = sessionFailure(s);

    const a = await s.open();
    const aFailed = streamError(a);
    a.write(randomBytes(200 * KiB));
    const err = await Promise.race([aFailed, failed]);
    expect(err.code).toBe("ECONNRESET");
    expect(await peer.waitFor("rst-sent")).toMatchObject({ id: a.id, readErr: "", err: "" });

    const data = randomBytes(300 * KiB);
    const b = await s.open();
    const [, echoed] = await deadline(
      Promise.all([writeInPieces(b, data), digestOf(b)]),
      20_000,
      "echo after reset",
    );
    expect(echoed.hex).toBe(sha256(data));
    expect(s.closed).toBe(false);
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });

  test("the reference refuses a stream beyond its accept backlog with RST: we fail it with ECONNREFUSED", async () => {
    const { peer, socket } = await startGoPeer("hold", { backlog: 1 });
    const s = new Session(socket, { client: true });
    const failed = sessionFailure(s);

    const a = await s.open(); // waits in the reference's backlog, never accepted
    a.on("error", () => {});
    a.write("a");
    const b = await s.open();
    const bFailed = streamError(b);
    b.write("b");

    const err = await Promise.race([bFailed, failed]);
    expect(err.code).toBe("ECONNREFUSED"); // RST before any ACK
    expect(await peer.waitForStderr("backlog exceeded, forcing connection reset")).toContain(
      "backlog exceeded",
    );
    expect(a.destroyed).toBe(false);
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });
});
