import { afterEach, beforeAll, describe, expect, test } from "vitest";
import { Session, type YamuxStream } from "../../lib/tunnel/yamux/index.ts";
import { buildGoPeer } from "./go-build.ts";
import { killGoPeers, startGoPeer } from "./go-peer.ts";
import { deadline, digestOf, randomBytes, sessionFailure, sha256, writeInPieces } from "./streams.ts";

// Bulk data against hashicorp/yamux. Every payload is larger than or equal to the 256 KiB initial
// window, so neither side gets through without the other's window updates.

const KiB = 1024;
const MiB = 1024 * KiB;

beforeAll(() => buildGoPeer(), 180_000);
afterEach(() => killGoPeers());

/** Sends `data` on a fresh stream, reads the echo to the end (the peer's FIN) and digests it. */
async function roundTrip(s: Session, data: Buffer): Promise<{ id: number; hex: string; bytes: number }> {
  const st = await s.open();
  const [, got] = await Promise.all([writeInPieces(st, data), digestOf(st)]);
  return { id: st.id, ...got };
}

/** Echoes inbound streams; records their ids and any stream errors. */
function echoInbound(s: Session): { ids: number[]; errors: Error[] } {
  const seen = { ids: [] as number[], errors: [] as Error[] };
  s.on("stream", (st: YamuxStream) => {
    seen.ids.push(st.id);
    st.on("error", (err) => seen.errors.push(err));
    st.pipe(st);
  });
  return seen;
}

describe("TS client -> Go echo server", () => {
  test("200 concurrent streams x 256 KiB, SHA-256 verified", async () => {
    const { peer, socket } = await startGoPeer("echo-server");
    const s = new Session(socket, { client: true });
    const payloads = Array.from({ length: 200 }, () => randomBytes(256 * KiB));

    const results = await deadline(
      Promise.race([Promise.all(payloads.map((p) => roundTrip(s, p))), sessionFailure(s)]),
      40_000,
      "200 echoes",
    );

    results.forEach((r, i) => {
      expect(r.bytes).toBe(payloads[i]!.length);
      expect(r.hex).toBe(sha256(payloads[i]!));
    });
    const ids = results.map((r) => r.id);
    expect(new Set(ids).size).toBe(200);
    expect(ids.every((id) => id % 2 === 1)).toBe(true); // client ids are odd
    const echoed = await peer.waitForCount("echoed", 200);
    for (const e of echoed) expect(e).toMatchObject({ bytes: 256 * KiB, err: "", closeErr: "" });
    expect(peer.stderr).not.toMatch(/\[ERR\]/);

    s.destroy();
    await peer.waitFor("session-closed");
    expect(await peer.waitExit()).toBe(0);
  });

  test("one 64 MiB stream, both directions at once", async () => {
    const { peer, socket } = await startGoPeer("echo-server");
    const s = new Session(socket, { client: true });
    const data = randomBytes(64 * MiB);

    const got = await deadline(Promise.race([roundTrip(s, data), sessionFailure(s)]), 40_000, "64 MiB echo");

    expect(got.bytes).toBe(data.length);
    expect(got.hex).toBe(sha256(data));
    expect(await peer.waitFor("echoed")).toMatchObject({ bytes: 64 * MiB, err: "" });
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });
});

describe("Go client -> TS echo server", () => {
  test("200 concurrent streams x 256 KiB, SHA-256 verified by the Go side", async () => {
    const { peer, socket } = await startGoPeer("echo-client", { streams: 200, size: 256 * KiB });
    const s = new Session(socket, { client: false });
    const seen = echoInbound(s);

    const result = await Promise.race([peer.waitFor("echo-result", undefined, 40_000), sessionFailure(s)]);

    // ok: every echo matched; allClosed: we sent FIN on every stream; extraBytes: nothing after the echo.
    expect(result).toMatchObject({ ok: true, failed: 0, allClosed: true, extraBytes: 0 });
    expect(seen.errors).toEqual([]);
    expect(seen.ids).toHaveLength(200);
    expect(seen.ids.every((id) => id % 2 === 1)).toBe(true); // opened by the Go client: odd
    expect(await peer.waitExit()).toBe(0);
    expect(peer.stderr).not.toMatch(/\[ERR\]/);
  });

  test("one 64 MiB stream", async () => {
    const { peer, socket } = await startGoPeer("echo-client", { streams: 1, size: 64 * MiB });
    const s = new Session(socket, { client: false });
    const seen = echoInbound(s);

    const result = await Promise.race([peer.waitFor("echo-result", undefined, 40_000), sessionFailure(s)]);

    expect(result).toMatchObject({ ok: true, failed: 0, allClosed: true, extraBytes: 0 });
    expect(seen.errors).toEqual([]);
    expect(await peer.waitExit()).toBe(0);
  });
});
