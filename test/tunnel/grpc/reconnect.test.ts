/** Stream lifecycle of the tunnel channel over real yamux sessions. */
import { once } from "node:events";
import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { createGrpcStreamServer, createTunnelChannel } from "../../../lib/tunnel/grpc/index.ts";
import type { Session, YamuxStream } from "../../../lib/tunnel/yamux/index.ts";
import { until } from "../../support/until.ts";
import { sessionPair } from "../yamux/harness.ts";
import { bidi, type GenericClient, serverStream, unary } from "./client-calls.ts";
import { stateChange, type TunnelRig, tunnelRig } from "./rigs.ts";
import { TestClient, testServer } from "./test-service.ts";

const closed = (s: Duplex) =>
  s.closed ? Promise.resolve() : once(s, "close", { signal: AbortSignal.timeout(5000) }).then(() => {});

let rig: TunnelRig | undefined;
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  await rig?.close();
  rig = undefined;
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Server-side streams as the rig's server session accepts them. */
function acceptedStreams(session: Session): YamuxStream[] {
  const seen: YamuxStream[] = [];
  session.on("stream", (s) => seen.push(s));
  return seen;
}

describe("tunnel channel stream lifecycle", () => {
  it("runs many concurrent calls of every kind over one yamux stream", async () => {
    rig = await tunnelRig();
    const { client } = rig;
    const calls = [
      ...Array.from({ length: 300 }, (_, i) => unary(client, { text: String(i) })),
      ...Array.from({ length: 30 }, (_, i) => serverStream(client, { text: `s${i}`, count: 10 })),
      ...Array.from({ length: 30 }, (_, i) =>
        bidi(client, [{ text: `b${i}` }, { text: `c${i}`, pad: 32 * 1024 }]),
      ),
    ];
    const outcomes = await Promise.all(calls);
    expect(outcomes.filter((o) => o.code !== grpc.status.OK)).toEqual([]);
    expect(outcomes.slice(0, 300).map((o) => o.responses[0]?.text)).toEqual(
      Array.from({ length: 300 }, (_, i) => `unary:${i}`),
    );
    expect(outcomes.slice(300, 330).every((o) => o.responses.length === 10)).toBe(true);
    expect(rig.opened).toHaveLength(1);
    expect(rig.session.server.stats.openStreams).toBe(1);
    expect(rig.streamServer.streams).toBe(1);
  });

  it("a stream reset by the client side: in-flight call fails UNAVAILABLE, next call opens a new stream", async () => {
    rig = await tunnelRig();
    const accepted = acceptedStreams(rig.session.server);
    expect((await unary(rig.client, { text: "one" })).code).toBe(grpc.status.OK);

    const cancelled = once(rig.recorder, "cancelled", { signal: AbortSignal.timeout(5000) });
    const arrived = once(rig.recorder, "call", { signal: AbortSignal.timeout(5000) });
    const inFlight = unary(rig.client, { hang: true });
    await arrived;
    const left = stateChange(rig.channel, grpc.connectivityState.READY);
    rig.opened[0]?.destroy(); // yamux RST
    expect((await inFlight).code).toBe(grpc.status.UNAVAILABLE);
    await cancelled; // the server learnt the call is gone
    await left;
    await closed(accepted[0] as YamuxStream);

    const again = await unary(rig.client, { text: "two" });
    expect(again).toMatchObject({ code: grpc.status.OK, responses: [{ text: "unary:two" }] });
    expect(rig.opened).toHaveLength(2);
    expect(rig.opened[1]?.id).not.toBe(rig.opened[0]?.id);
    expect(rig.streamServer.streams).toBe(1);
  });

  it("a stream reset or ended by the serving side makes the next call reconnect", async () => {
    rig = await tunnelRig();
    const accepted = acceptedStreams(rig.session.server);
    for (const [i, breakIt] of [(s: Duplex) => s.destroy(), (s: Duplex) => s.end()].entries()) {
      expect((await unary(rig.client, { text: `before${i}` })).code).toBe(grpc.status.OK);
      const left = stateChange(rig.channel, grpc.connectivityState.READY);
      breakIt(accepted[i] as YamuxStream);
      await left;
      expect((await unary(rig.client, { text: `after${i}` })).code).toBe(grpc.status.OK);
      expect(rig.opened).toHaveLength(i + 2);
    }
  });

  it("follows the tunnel: when the session dies, open() on its replacement serves the next call", async () => {
    const { server } = testServer();
    const streams = createGrpcStreamServer<string>(server);
    let current = await sessionPair();
    const sessions = [current];
    current.server.on("stream", (s) => streams.inject(s, "tunnel-1"));
    const channel = createTunnelChannel(() => current.client.open());
    const client = new TestClient("x", grpc.credentials.createInsecure(), {
      channelOverride: channel,
    }) as GenericClient;
    cleanups.push(async () => {
      client.close();
      await streams.close(0);
      server.forceShutdown();
      for (const s of sessions) s.close();
    });

    expect((await unary(client, { text: "a" })).code).toBe(grpc.status.OK);
    const left = stateChange(channel, grpc.connectivityState.READY);
    current.client.destroy();
    await left;
    current = await sessionPair();
    sessions.push(current);
    current.server.on("stream", (s) => streams.inject(s, "tunnel-2"));
    expect((await unary(client, { text: "b" })).code).toBe(grpc.status.OK);
    expect(current.server.stats.openStreams).toBe(1);
  });

  it("open() failing: calls fail UNAVAILABLE with its message; a later call connects once it succeeds", async () => {
    const { server } = testServer();
    const streams = createGrpcStreamServer<string>(server);
    const pair = await sessionPair();
    pair.server.on("stream", (s) => streams.inject(s));
    let attempts = 0;
    const channel = createTunnelChannel(
      async () => {
        attempts++;
        if (attempts === 1) throw new Error("no tunnel for agent 42");
        return pair.client.open();
      },
      { channelOptions: { "grpc.initial_reconnect_backoff_ms": 50, "grpc.max_reconnect_backoff_ms": 50 } },
    );
    const client = new TestClient("x", grpc.credentials.createInsecure(), {
      channelOverride: channel,
    }) as GenericClient;
    cleanups.push(async () => {
      client.close();
      await streams.close(0);
      server.forceShutdown();
      pair.close();
    });

    const failed = await unary(client, { text: "a" });
    expect(failed.code).toBe(grpc.status.UNAVAILABLE);
    expect(failed.details).toContain("no tunnel for agent 42");

    // waitForReady: queue through the backoff instead of failing fast.
    const ok = await unary(
      client,
      { text: "b" },
      { metadata: new grpc.Metadata({ waitForReady: true }), deadlineMs: 5000 },
    );
    expect(ok.code).toBe(grpc.status.OK);
    expect(attempts).toBe(2);
  });

  it("channel.close() ends the stream on both sides once calls are done", async () => {
    rig = await tunnelRig();
    const accepted = acceptedStreams(rig.session.server);
    expect((await unary(rig.client, { text: "a" })).code).toBe(grpc.status.OK);
    rig.client.close();
    await Promise.all([closed(rig.opened[0] as YamuxStream), closed(accepted[0] as YamuxStream)]);
    expect(rig.streamServer.streams).toBe(0);
    expect(rig.session.client.stats.openStreams).toBe(0);
  });

  it("a stream that open() delivers after close() is destroyed, and open() saw the abort", async () => {
    const pair = await sessionPair();
    cleanups.push(() => pair.close());
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let signal: AbortSignal | undefined;
    let late: YamuxStream | undefined;
    let opening: () => void = () => {};
    const openCalled = new Promise<void>((r) => {
      opening = r;
    });
    const channel = createTunnelChannel(async (s) => {
      signal = s;
      opening();
      await gate;
      late = await pair.client.open();
      return late;
    });
    channel.getConnectivityState(true); // start connecting
    await openCalled;
    channel.close();
    expect(signal?.aborted).toBe(true);
    release();
    await until(() => late !== undefined);
    await closed(late as YamuxStream);
  });
});
