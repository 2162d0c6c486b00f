import { afterEach, beforeAll, describe, expect, test } from "vitest";
import { GoAwayCode, Session } from "../../lib/tunnel/yamux/index.ts";
import { buildGoPeer } from "./go-build.ts";
import { killGoPeers, startGoPeer } from "./go-peer.ts";
import {
  deadline,
  digestOf,
  randomBytes,
  readExactly,
  sessionFailure,
  sha256,
  writeInPieces,
} from "./streams.ts";

// Ping and GoAway against hashicorp/yamux.

const KiB = 1024;

beforeAll(() => buildGoPeer(), 180_000);
afterEach(() => killGoPeers());

describe("ping", () => {
  test("we ping the reference: every ping is answered", async () => {
    const { peer, socket } = await startGoPeer("echo-server");
    const s = new Session(socket, { client: true, keepAliveIntervalMs: 0 });
    for (let i = 0; i < 3; i++) {
      const rtt = await deadline(Promise.race([s.ping(), sessionFailure(s)]), 5_000, `ping ${i}`);
      expect(Number.isFinite(rtt) && rtt >= 0).toBe(true);
    }
    expect(s.rttMs).toBeGreaterThan(0);
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });

  test("the reference pings us: every ping is answered", async () => {
    const { peer, socket } = await startGoPeer("ping", { count: 5 });
    const s = new Session(socket, { client: false, keepAliveIntervalMs: 0 });
    const failed = sessionFailure(s);

    const result = await Promise.race([peer.waitFor("ping-result"), failed]);

    expect(result).toMatchObject({ sent: 5, ok: 5 });
    for (const p of peer.named("ping")) expect(p.err).toBe("");
    expect(await peer.waitExit()).toBe(0);
  });
});

describe("GoAway", () => {
  test("from the reference: we refuse new opens, the open stream still finishes", async () => {
    const { peer, socket } = await startGoPeer("echo-server", { "goaway-after": 1 });
    const s = new Session(socket, { client: true });
    const failed = sessionFailure(s);
    const goaway = new Promise<number>((resolve) => s.once("goaway", resolve));
    const first = randomBytes(300 * KiB);
    const second = randomBytes(300 * KiB);

    const a = await s.open();
    const echoed = digestOf(a);
    a.write(first); // more than one window: the echo is still in flight when GoAway arrives
    expect(await deadline(Promise.race([goaway, failed]), 10_000, "goaway event")).toBe(GoAwayCode.Normal);
    expect((await peer.waitFor("goaway-sent")).err).toBe("");

    // The reference answers OpenStream after a remote GoAway with ErrRemoteGoAway, sending nothing.
    await expect(s.open()).rejects.toMatchObject({ code: "ERR_YAMUX_REMOTE_GOAWAY" });
    await writeInPieces(a, second);
    const got = await deadline(Promise.race([echoed, failed]), 20_000, "echo of the open stream");

    expect(got.hex).toBe(sha256(Buffer.concat([first, second])));
    expect(await peer.waitFor("echoed")).toMatchObject({ id: a.id, bytes: 600 * KiB, err: "" });
    expect(s.closed).toBe(false);
    s.destroy();
    expect(await peer.waitExit()).toBe(0);
  });

  test("from us: the reference's OpenStream fails with ErrRemoteGoAway, the open stream still finishes", async () => {
    const { peer, socket } = await startGoPeer("goaway-probe", { size: 512 * KiB });
    const s = new Session(socket, { client: false });
    const failed = sessionFailure(s);

    const a = await deadline(Promise.race([s.accept(), failed]), 10_000, "accept");
    expect((await deadline(readExactly(a, 2), 10_000, "hi")).toString()).toBe("hi");
    s.goAway(GoAwayCode.Normal);
    a.write("ok"); // sent after the GoAway: once the reference has read it, it has seen the GoAway
    a.pipe(a); // then echo the rest and end when the reference ends

    const probe = await Promise.race([peer.waitFor("open-after-goaway"), failed]);
    expect(probe).toMatchObject({ remoteGoAway: true, err: "remote end is not accepting connections" });
    expect(await peer.waitFor("existing-stream")).toMatchObject({
      ok: true,
      echoed: true,
      closedByPeer: true,
    });
    expect(await peer.waitExit()).toBe(0);
  });

  test("from us with a protocol-error code: the reference ends the session", async () => {
    const { peer, socket } = await startGoPeer("echo-server");
    const s = new Session(socket, { client: true, keepAliveIntervalMs: 0 });
    const closed = new Promise<void>((resolve) => s.once("close", () => resolve()));

    s.goAway(GoAwayCode.ProtocolError);

    expect(await peer.waitFor("session-closed")).toMatchObject({ err: "yamux protocol error" });
    expect(await peer.waitForStderr("received protocol error go away")).toContain("protocol error");
    await deadline(closed, 10_000, "our session closing after the reference hung up");
    expect(await peer.waitExit()).toBe(0);
  });
});
