/** A handler can tell which tunnel (which authenticated peer) a call came over. */
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { createGrpcStreamServer, createTunnelChannel } from "../../../lib/tunnel/grpc/index.ts";
import { sessionPair } from "../yamux/harness.ts";
import {
  bidi,
  type CallOpts,
  clientStream,
  type GenericClient,
  serverStream,
  unary,
} from "./client-calls.ts";
import { type ObservedCall, type Req, TestClient, testServer } from "./test-service.ts";

interface Peer {
  agentId: number;
  name: string;
}

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A yamux tunnel whose accepted streams are injected with `peer` (or none). */
async function tunnel(inject: (s: import("node:stream").Duplex) => void): Promise<GenericClient> {
  const pair = await sessionPair();
  pair.server.on("stream", inject);
  const channel = createTunnelChannel(() => pair.client.open());
  const client = new TestClient("ignored", grpc.credentials.createInsecure(), {
    channelOverride: channel,
  }) as GenericClient;
  cleanups.push(() => {
    client.close();
    pair.close();
  });
  return client;
}

function sentBy(name: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("x-sender", name);
  return md;
}

describe("peerOf(call)", () => {
  it("maps every call to the peer of the stream it came over, with two peers calling concurrently", async () => {
    const { server, recorder } = testServer();
    const streams = createGrpcStreamServer<Peer>(server);
    cleanups.push(async () => {
      await streams.close(0);
      server.forceShutdown();
    });
    const a: Peer = { agentId: 1, name: "agent-a" };
    const b: Peer = { agentId: 2, name: "agent-b" };
    const clientA = await tunnel((s) => streams.inject(s, a));
    const clientB = await tunnel((s) => streams.inject(s, b));

    const kinds = [unary, serverStream, (c: GenericClient, r: Req, o: CallOpts) => clientStream(c, [r], o)];
    const calls = Array.from({ length: 40 }, (_, i) => {
      const [client, name] = i % 2 ? [clientB, "agent-b"] : [clientA, "agent-a"];
      const call = kinds[Math.floor(i / 2) % kinds.length] ?? unary;
      return call(client, { text: String(i), count: 1 }, { metadata: sentBy(name) });
    });
    calls.push(bidi(clientA, [{ text: "a" }], { metadata: sentBy("agent-a") }));
    calls.push(bidi(clientB, [{ text: "b" }], { metadata: sentBy("agent-b") }));
    const outcomes = await Promise.all(calls);
    expect(outcomes.every((o) => o.code === grpc.status.OK)).toBe(true);
    expect(streams.streams).toBe(2);

    expect(recorder.calls).toHaveLength(42);
    expect(new Set(recorder.calls.map((c) => c.getPath())).size).toBe(4);
    for (const call of recorder.calls) {
      const peer = streams.peerOf(call);
      expect(peer?.name).toBe(call.metadata.get("x-sender")[0]);
    }
    expect(recorder.calls.map((c) => streams.peerOf(c)).filter((p) => p === a)).toHaveLength(21);
    expect(recorder.calls.map((c) => streams.peerOf(c)).filter((p) => p === b)).toHaveLength(21);
  });

  it("is undefined for a stream injected without a peer and for calls that did not come over a stream", async () => {
    const { server, recorder } = testServer();
    const streams = createGrpcStreamServer<Peer>(server);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    const tcpClient = new TestClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as GenericClient;
    cleanups.push(async () => {
      tcpClient.close();
      await streams.close(0);
      server.forceShutdown();
    });
    const anonymous = await tunnel((s) => streams.inject(s));

    expect((await unary(anonymous, { text: "x" })).code).toBe(grpc.status.OK);
    expect((await unary(tcpClient, { text: "y" })).code).toBe(grpc.status.OK);
    expect(recorder.calls.map((c: ObservedCall) => streams.peerOf(c))).toEqual([undefined, undefined]);
  });

  it("survives server interceptors that pass the metadata on, and cannot be forged by request metadata", async () => {
    const seenByInterceptor: string[] = [];
    const interceptor: grpc.ServerInterceptor = (_m, call) =>
      new grpc.ServerInterceptingCall(call, {
        start: (next) =>
          next({
            onReceiveMetadata: (md, nextMd) => {
              seenByInterceptor.push(String(md.get("x-sender")[0]));
              nextMd(md);
            },
          }),
      });
    const { server, recorder } = testServer({ interceptors: [interceptor] });
    const streams = createGrpcStreamServer<Peer>(server);
    cleanups.push(async () => {
      await streams.close(0);
      server.forceShutdown();
    });
    const real: Peer = { agentId: 9, name: "agent-real" };
    const client = await tunnel((s) => streams.inject(s, real));
    // Whatever the remote puts in its metadata, the peer comes from the stream.
    const out = await unary(client, { text: "x" }, { metadata: sentBy("agent-forged") });
    expect(out.code).toBe(grpc.status.OK);
    expect(seenByInterceptor).toEqual(["agent-forged"]);
    expect(streams.peerOf(recorder.calls[0] as ObservedCall)).toBe(real);
  });
});
