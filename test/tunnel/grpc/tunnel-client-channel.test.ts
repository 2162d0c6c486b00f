/**
 * The agent's gRPC channel over a real reconnecting TunnelClient: identity from the tunnel, calls
 * moving to the replacement when a tunnel drains, feeds told to reconnect, network cuts survived.
 */
import { once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { DRAINED_DETAILS } from "../../../lib/tunnel/grpc/index.ts";
import { until } from "../../support/until.ts";
import { bidi, type Outcome, serverStream, unary } from "./client-calls.ts";
import { stateChange } from "./rigs.ts";
import { type ObservedCall, type Req, type Res, retryAttempt } from "./test-service.ts";
import { type TunnelClientRig, tunnelClientRig } from "./tunnel-client-rig.ts";

let rig: TunnelClientRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const within = (ms: number) => ({ signal: AbortSignal.timeout(ms) });

/**
 * A server-streaming call that stays open after its first response, like a configuration feed.
 * `started` resolves once that response reached the client: from then on grpc-js no longer retries
 * the call, whatever ends it. Its deadline turns a feed left hanging into DEADLINE_EXCEEDED.
 */
function openFeed(client: TunnelClientRig["client"]): { started: Promise<void>; outcome: Promise<Outcome> } {
  let started: () => void = () => {};
  const first = new Promise<void>((resolve) => {
    started = resolve;
  });
  const outcome = serverStream(
    client,
    { text: "feed", count: 1, hold: true },
    { onResponse: () => started(), deadlineMs: 10_000 },
  );
  return { started: first, outcome };
}

/** The `text` of the request a unary call carried. */
const textOf = (call: ObservedCall) => (call as unknown as { request: Req }).request.text;

describe("tunnelClientChannel", () => {
  it("reaches the server as the tunnel's identity; nothing in the request can claim another", async () => {
    rig = await tunnelClientRig({
      // The stream header names another agent: the tunnel's identity wins all the same.
      channel: { header: { agentId: "999", metadata: { agent: "agent-forged" } } },
    });
    const forged = new grpc.Metadata();
    forged.set("x-agent", "agent-forged");
    const outcomes = await Promise.all([
      unary(rig.client, { text: "u" }, { metadata: forged }),
      serverStream(rig.client, { text: "s", count: 2 }, { metadata: forged }),
      bidi(rig.client, [{ text: "b" }], { metadata: forged }),
    ]);
    expect(outcomes.map((o) => o.code)).toEqual([grpc.status.OK, grpc.status.OK, grpc.status.OK]);

    const tunnel = rig.sessions[0]!;
    expect(tunnel.identity).toEqual({ agent: "agent-1", tunnel: 1 });
    expect(rig.recorder.calls).toHaveLength(3);
    for (const call of rig.recorder.calls) {
      expect(call.metadata.get("x-agent")).toEqual(["agent-forged"]); // it did arrive…
      expect(rig.streams.peerOf(call)).toBe(tunnel.identity); // …and changed nothing
    }
    expect(rig.sessions).toHaveLength(1);
    expect(rig.streams.streams).toBe(1); // one KIND_GRPC stream carries every call
  });

  it("a draining tunnel: its running call finishes there, new calls go over the replacement, none fails", async () => {
    rig = await tunnelClientRig({ drainGraceMs: 10_000 });
    const { client, recorder, sessions } = rig;

    // A streaming call in flight on tunnel 1.
    const feed = client.bidi() as grpc.ClientDuplexStream<Req, Res>;
    const replies: string[] = [];
    feed.on("data", (r: Res) => replies.push(r.text));
    const feedStatus = once(feed, "status", within(10_000)) as Promise<[grpc.StatusObject]>;
    feed.write({ text: "a" });
    await once(feed, "data", within(5000));
    const feedCall = recorder.calls[0]!;

    // Unary calls without pause from 4 callers; tunnel 1 is drained once 20 of them are done.
    const total = 80;
    const outcomes: Outcome[] = [];
    let started = 0;
    let drained: Promise<void> | undefined;
    const caller = async () => {
      while (started < total) {
        const i = started++;
        outcomes[i] = await unary(client, { text: `u${i}` }, { deadlineMs: 10_000 });
        if (outcomes.filter(Boolean).length === 20) drained = sessions[0]!.close(10_000);
      }
    };
    await Promise.all(Array.from({ length: 4 }, caller));

    expect(outcomes.filter((o) => o.code !== grpc.status.OK)).toEqual([]);
    expect(outcomes).toHaveLength(total);
    const unaries = recorder.calls.filter((c) => c.getPath() === "/test.Test/Unary");
    const attempts = new Map<string, number>();
    for (const c of unaries) attempts.set(textOf(c) ?? "", (attempts.get(textOf(c) ?? "") ?? 0) + 1);
    expect(attempts.size).toBe(total);
    expect(Math.max(...attempts.values())).toBeLessThanOrEqual(2); // at most one retry each
    // The first calls went over tunnel 1, the last ones over its replacement.
    expect(sessions).toHaveLength(2);
    expect(sessions[1]!.identity.tunnel).toBe(2);
    const last = unaries.filter((c) => Number(textOf(c)?.slice(1)) >= total - 20);
    expect(last.map((c) => rig?.tunnelOf(c))).toEqual(last.map(() => 2));
    expect(unaries.filter((c) => rig?.tunnelOf(c) === 1).length).toBeGreaterThanOrEqual(20);

    // Tunnel 1 stays up for the running call, which finishes there.
    expect(sessions[0]!.closed).toBe(false);
    feed.write({ text: "b" });
    feed.end();
    const [status] = await feedStatus;
    expect(status.code).toBe(grpc.status.OK);
    expect(replies).toEqual(["A", "B"]);
    expect(rig.tunnelOf(feedCall)).toBe(1);
    await drained;
    expect(sessions[0]!.closed).toBe(true);
    expect([...rig.tunnelClient.sessions]).toEqual([rig.tunnelClient.active]);
    expect(rig.streams.streams).toBe(1);
  });

  it("a stream opened on a tunnel as the server sends it GoAway is opened again on the next", async () => {
    rig = await tunnelClientRig({
      start: false,
      onSession: (session) => {
        if (session.identity.tunnel === 1) session.goAway();
      },
    });
    const call = unary(rig.client, { text: "first" }, { deadlineMs: 10_000 });
    // The channel waits for a tunnel: it opens its stream as soon as tunnel 1 is up, which is
    // before the client has read the GoAway that tunnel 1 came with.
    await until(() => rig?.tunnelClient.listenerCount("connected") === 1);
    rig.tunnelClient.start();
    expect(await call).toMatchObject({ code: grpc.status.OK, responses: [{ text: "unary:first" }] });
    expect(rig.recorder.calls.map((c) => [rig?.tunnelOf(c), retryAttempt(c)])).toEqual([[2, 0]]);
  });

  it("past the grace, a feed on a draining tunnel ends UNAVAILABLE and a unary call is retried on the next", async () => {
    rig = await tunnelClientRig({ drainGraceMs: 200 });
    const { client, recorder } = rig;
    const feed = openFeed(client);
    await feed.started;
    const unaryArrived = once(recorder, "call", within(5000));
    const slow = unary(client, { text: "slow", hangFirst: true }, { deadlineMs: 10_000 });
    await unaryArrived;
    const drained = rig.sessions[0]!.close(60_000);

    // The feed had streamed already: grpc-js does not retry it, its caller is told to call again.
    expect(await feed.outcome).toMatchObject({
      code: grpc.status.UNAVAILABLE,
      details: DRAINED_DETAILS,
      responses: [{ text: "feed#0" }],
    });
    // The unary call had received nothing: retried once, over the replacement.
    expect(await slow).toMatchObject({ code: grpc.status.OK, responses: [{ text: "unary:slow" }] });
    const unaries = recorder.calls.filter((c) => c.getPath() === "/test.Test/Unary");
    expect(unaries.map((c) => [rig?.tunnelOf(c), retryAttempt(c)])).toEqual([
      [1, 0],
      [2, 1],
    ]);
    // The handlers of both calls cut short learnt that they were over.
    const [feedCall, firstAttempt] = [recorder.calls[0]!, unaries[0]!];
    await until(() => feedCall.cancelled && firstAttempt.cancelled, 5000, "handlers told");
    await drained; // the tunnel's 60 s grace is not waited for: nothing holds it open
    // The feed calls again, over the replacement.
    expect((await serverStream(client, { text: "again", count: 1 })).code).toBe(grpc.status.OK);
    expect(rig.tunnelOf(recorder.calls.at(-1)!)).toBe(2);
  });

  it("survives a tunnel that just closes: a feed ends UNAVAILABLE, the next call goes over the new tunnel", async () => {
    rig = await tunnelClientRig();
    const feed = openFeed(rig.client);
    await feed.started;
    const unaryArrived = once(rig.recorder, "call", within(5000));
    const cutShort = unary(rig.client, { text: "cut", hangFirst: true }, { deadlineMs: 10_000 });
    await unaryArrived;

    const left = stateChange(rig.channel, grpc.connectivityState.READY);
    for (const socket of rig.sockets) socket.destroy(); // the network goes, no GoAway
    expect(await feed.outcome).toMatchObject({
      code: grpc.status.UNAVAILABLE,
      responses: [{ text: "feed#0" }],
    });
    await left;
    // The unary call in flight was retried once, over the new tunnel.
    expect(await cutShort).toMatchObject({ code: grpc.status.OK, responses: [{ text: "unary:cut" }] });

    const after = await unary(rig.client, { text: "after" }, { deadlineMs: 10_000 });
    expect(after).toMatchObject({ code: grpc.status.OK, responses: [{ text: "unary:after" }] });
    expect(rig.sessions[0]!.closed).toBe(true);
    expect(rig.tunnelOf(rig.recorder.calls.at(-1)!)).toBe(2);
  });
});
