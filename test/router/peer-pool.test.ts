// PeerPool against a real tunnel server on loopback (standing in for a peer's private API): one
// shared dial per peer, a fresh bearer token each dial, refusals told apart, closed and draining
// tunnels replaced, and a caller's abort that ends only its own wait.
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, beforeEach, expect, test } from "vitest";
import { PeerPool, PeerRejectedError } from "../../lib/router/index.ts";
import { serveTunnels, type TunnelServer, type TunnelSession } from "../../lib/tunnel/session/index.ts";
import { HandshakeError, HandshakeRejection } from "../../lib/tunnel/transport/index.ts";
import { until } from "../support/until.ts";

let server: TunnelServer<string>;
/** Authorization headers seen, one per handshake. */
let handshakes: string[];
/** The status to refuse the next handshakes with (0: accept). */
let refuseWith = 0;
/** Held while set: handshakes wait for it. */
let gate: Promise<void> | undefined;
const accepted: Duplex[] = [];
const pools: PeerPool[] = [];

beforeAll(async () => {
  server = await serveTunnels<string>({
    host: "127.0.0.1",
    tunnel: { keepAliveIntervalMs: 0 },
    authenticate: async (req) => {
      handshakes.push(String(req.headers.authorization));
      await gate;
      if (refuseWith) throw new HandshakeRejection(refuseWith, "no");
      return "peer";
    },
    onSession: (s) =>
      s.on("stream", (stream: Duplex) => {
        stream.on("error", () => {});
        accepted.push(stream);
      }),
  });
});
beforeEach(() => {
  handshakes = [];
  refuseWith = 0;
  gate = undefined;
});
afterAll(async () => {
  for (const p of pools) p.destroy();
  await server.close(0);
});

function pool(extra: Partial<ConstructorParameters<typeof PeerPool>[0]> = {}): PeerPool {
  let n = 0;
  const p = new PeerPool({ token: async () => `t${++n}`, tunnel: { keepAliveIntervalMs: 0 }, ...extra });
  pools.push(p);
  return p;
}

/** An open whose stream's errors (resets when a test tears down) are expected. */
const open = (p: PeerPool, signal?: AbortSignal) =>
  p.open(server.url, signal).then((s) => s.on("error", () => {}));

/** The server's end of the pool's tunnel (the newest one). */
const serverSessions = () => [...server.sessions] as TunnelSession<string>[];

test("concurrent first opens share one dial, with a bearer token; later opens reuse the tunnel", async () => {
  const p = pool();
  expect(p.size).toBe(0);
  const before = accepted.length;
  const streams = await Promise.all([open(p), open(p), open(p)]);
  expect(handshakes).toEqual(["Bearer t1"]);
  expect(p.size).toBe(1);
  await open(p);
  expect(handshakes).toHaveLength(1);
  streams[0]!.write("x");
  await until(() => accepted.length === before + 4, 5000, "four streams at the peer");
  p.destroy();
});

test("a peer that refuses the credentials (401, 403): PeerRejectedError with the status; the next open dials again", async () => {
  for (const status of [401, 403]) {
    const p = pool();
    refuseWith = status;
    const err = await open(p).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PeerRejectedError);
    expect((err as PeerRejectedError).status).toBe(status);
    expect((err as PeerRejectedError).peerUrl).toBe(server.url);
    expect((err as PeerRejectedError).cause).toBeInstanceOf(HandshakeError);
    expect(p.size).toBe(0);
    // The same through a caller's signal.
    await expect(p.open(server.url, new AbortController().signal)).rejects.toBeInstanceOf(PeerRejectedError);
    refuseWith = 0;
    await open(p);
    expect(handshakes).toEqual(["Bearer t1", "Bearer t2", "Bearer t3"]); // a fresh token each dial
    handshakes = [];
    p.destroy();
  }
});

test("any other refusal is the transport's error, not PeerRejectedError", async () => {
  for (const status of [400, 404, 503]) {
    const p = pool();
    refuseWith = status;
    const err = await open(p).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HandshakeError);
    expect(err).not.toBeInstanceOf(PeerRejectedError);
    expect((err as HandshakeError).status).toBe(status);
    expect(p.size).toBe(0);
    p.destroy();
  }
});

test("a tunnel the peer closed is replaced by a fresh dial on next use", async () => {
  const p = pool();
  await open(p);
  const [session] = serverSessions().slice(-1);
  session!.destroy();
  await until(() => p.size === 0, 5000, "the pool to forget the closed tunnel");
  await open(p);
  expect(handshakes).toHaveLength(2);
  expect(p.size).toBe(1);
  p.destroy();
});

test("a draining tunnel is replaced by a fresh dial, and closed once its streams are done", async () => {
  const p = pool();
  const first = await open(p);
  first.on("error", () => {});
  const [session] = serverSessions().slice(-1);
  const closed = new Promise((resolve) => session!.once("close", resolve));
  session!.goAway();
  await until(
    async () => {
      // The GoAway arrives at the pool's end of the tunnel: the next open dials again.
      await open(p);
      return handshakes.length === 2;
    },
    5000,
    "a second dial",
  );
  expect(p.size).toBe(1);
  first.destroy(); // its last stream done, the old tunnel closes
  await closed;
  p.destroy();
});

test("a tunnel that cannot open another stream is left to its streams; the next open dials a fresh one", async () => {
  const before = new Set(server.sessions);
  const p = pool({ tunnel: { keepAliveIntervalMs: 0, maxStreams: 1 } });
  const first = await open(p);
  const second = await open(p); // the first tunnel is full
  expect(handshakes).toEqual(["Bearer t1", "Bearer t2"]);
  expect(p.size).toBe(1);
  // The full tunnel was not told to go away (it is full, not draining): its stream still works.
  const [full] = serverSessions().filter((s) => !before.has(s));
  expect(full!.draining).toBe(false);
  expect(first.destroyed).toBe(false);
  second.destroy();
  p.destroy();
});

test("a caller's abort ends its own wait, not the shared dial", async () => {
  const p = pool();
  let release!: () => void;
  gate = new Promise((r) => {
    release = r;
  });
  const ctl = new AbortController();
  const reason = new Error("caller gone");
  const waiting = p.open(server.url, ctl.signal);
  const other = open(p);
  await until(() => handshakes.length === 1, 5000, "the handshake");
  ctl.abort(reason);
  await expect(waiting).rejects.toBe(reason);
  release();
  await other; // the same dial carried on
  expect(handshakes).toHaveLength(1);
  await expect(p.open(server.url, AbortSignal.abort(reason))).rejects.toBe(reason);
  await open(p, new AbortController().signal);
  expect(handshakes).toHaveLength(1);
  p.destroy();
});

test("destroy: tunnels closed, later opens refused, a dial in flight is closed when it lands", async () => {
  const p = pool();
  await open(p);
  const [up] = serverSessions().slice(-1);
  const upClosed = new Promise((resolve) => up!.once("close", resolve));
  let release!: () => void;
  gate = new Promise((r) => {
    release = r;
  });
  const q = pool();
  const inFlight = open(q).catch((e: unknown) => e);
  await until(() => handshakes.length === 2, 5000, "the second pool's handshake");
  p.destroy();
  q.destroy();
  expect(p.size).toBe(0);
  await upClosed;
  await expect(p.open(server.url)).rejects.toThrow("peer pool closed");
  const sessionsBefore = server.sessions.size;
  release();
  await inFlight;
  // The dial that landed after destroy was closed, not kept.
  await until(() => server.sessions.size <= sessionsBefore, 5000, "the late tunnel to close");
  expect(q.size).toBe(0);
});
