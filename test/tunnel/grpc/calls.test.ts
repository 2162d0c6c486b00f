import { once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { bidi, clientStream, echoMetadata, serverStream, unary } from "./client-calls.ts";
import { type Rig, type RigName, rigs } from "./rigs.ts";

// Node joins a repeated header into one comma-separated value, on TCP and tunnel alike.
const ECHOED = {
  "x-echo-text-initial": ["hello, again"],
  "x-echo-data-initial-bin": [`base64:${Buffer.from([0, 1, 2, 255]).toString("base64")}`],
};
const ECHOED_TRAILING = {
  "x-echo-text-trailing": ["hello, again"],
  "x-echo-data-trailing-bin": [`base64:${Buffer.from([0, 1, 2, 255]).toString("base64")}`],
};

function nextCall(rig: Rig) {
  return once(rig.recorder, "call", { signal: AbortSignal.timeout(5000) });
}

function nextCancel(rig: Rig) {
  return once(rig.recorder, "cancelled", { signal: AbortSignal.timeout(5000) });
}

describe.each(["tcp", "tunnel"] satisfies RigName[])("gRPC calls over %s", (name) => {
  let rig: Rig;
  afterEach(async () => rig?.close());

  async function start(serverOptions?: grpc.ServerOptions): Promise<Rig> {
    rig = await rigs[name](serverOptions);
    return rig;
  }

  it("unary: response, initial and trailing metadata (text and binary)", async () => {
    const { client } = await start();
    const out = await unary(client, { text: "hi" }, { metadata: echoMetadata() });
    expect(out).toMatchObject({ code: grpc.status.OK, responses: [{ text: "unary:hi" }] });
    expect(out.initial).toEqual(ECHOED);
    expect(out.trailing).toEqual(ECHOED_TRAILING);
  });

  it("unary: status code, message and trailing metadata of an error come back intact", async () => {
    const { client } = await start();
    const details = "agent 42: no such pod «web-0» ✓";
    const out = await unary(
      client,
      { fail: { code: grpc.status.PERMISSION_DENIED, details } },
      { metadata: echoMetadata() },
    );
    expect(out).toMatchObject({ code: grpc.status.PERMISSION_DENIED, details, responses: [] });
    expect(out.trailing).toEqual(ECHOED_TRAILING);
  });

  it("server streaming: every message in order, then the status", async () => {
    const { client } = await start();
    const ok = await serverStream(client, { text: "m", count: 5 }, { metadata: echoMetadata() });
    expect(ok.code).toBe(grpc.status.OK);
    expect(ok.responses.map((r) => r.text)).toEqual(["m#0", "m#1", "m#2", "m#3", "m#4"]);
    expect(ok.initial).toEqual(ECHOED);
    expect(ok.trailing).toEqual(ECHOED_TRAILING);

    const failed = await serverStream(client, {
      text: "m",
      count: 3,
      fail: { code: grpc.status.RESOURCE_EXHAUSTED, details: "quota" },
    });
    expect(failed).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED, details: "quota" });
    expect(failed.responses.map((r) => r.text)).toEqual(["m#0", "m#1", "m#2"]);
  });

  it("client streaming: all requests reach the server, one reply", async () => {
    const { client } = await start();
    const out = await clientStream(client, [{ text: "a" }, { text: "b" }, { text: "c" }], {
      metadata: echoMetadata(),
    });
    expect(out).toMatchObject({ code: grpc.status.OK, responses: [{ text: "a,b,c" }] });
    expect(out.initial).toEqual(ECHOED);
    expect(out.trailing).toEqual(ECHOED_TRAILING);
  });

  it("bidi: a reply per request, in order; 4 MiB each way crosses flow control windows", async () => {
    const { client } = await start();
    const reqs = Array.from({ length: 64 }, (_, i) => ({ text: `r${i}`, pad: 64 * 1024 }));
    const out = await bidi(client, reqs, { metadata: echoMetadata() });
    expect(out.code).toBe(grpc.status.OK);
    expect(out.responses.map((r) => r.text)).toEqual(reqs.map((r) => r.text.toUpperCase()));
    expect(out.responses.every((r) => r.pad?.length === 64 * 1024)).toBe(true);
    expect(out.trailing).toEqual(ECHOED_TRAILING);

    const failed = await bidi(client, [
      { text: "x" },
      { fail: { code: grpc.status.ABORTED, details: "stop" } },
    ]);
    expect(failed).toMatchObject({ code: grpc.status.ABORTED, details: "stop", responses: [{ text: "X" }] });
  });

  it("a large unary message (3 MiB) arrives whole", async () => {
    const { client } = await start();
    const out = await unary(client, { text: "big", pad: 3 * 1024 * 1024 });
    expect(out.code).toBe(grpc.status.OK);
    expect(out.responses[0]?.pad?.length).toBe(3 * 1024 * 1024);
  });

  it("deadline propagates: the server sees it on every call type", async () => {
    const { client } = await start();
    const opts = { deadlineMs: 4000 };
    const seen = [
      (await unary(client, { text: "d" }, opts)).responses[0]?.deadlineInMs,
      (await serverStream(client, { text: "d", count: 1 }, opts)).responses[0]?.deadlineInMs,
      (await clientStream(client, [{ text: "d" }], opts)).responses[0]?.deadlineInMs,
      (await bidi(client, [{ text: "d" }], opts)).responses[0]?.deadlineInMs,
    ];
    for (const ms of seen) {
      expect(ms).toBeGreaterThan(2000);
      expect(ms).toBeLessThanOrEqual(4000);
    }
    expect((await unary(client, { text: "none" })).responses[0]?.deadlineInMs).toBeNull();
  });

  it("a call past its deadline ends DEADLINE_EXCEEDED and the server sees it cancelled", async () => {
    const r = await start();
    const cancelled = nextCancel(r);
    const out = await unary(r.client, { hang: true }, { deadlineMs: 300 });
    expect(out.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(await cancelled).toEqual(["/test.Test/Unary"]);
  });

  it("client cancel propagates: CANCELLED locally, `cancelled` on the server, for each call type", async () => {
    const r = await start();
    const cases = [
      () => unary(r.client, { hang: true }, { cancelWhen: nextCall(r) }),
      () => serverStream(r.client, { hang: true }, { cancelWhen: nextCall(r) }),
      () => clientStream(r.client, [{ text: "a" }], { cancelWhen: nextCall(r) }),
      () => bidi(r.client, [{ text: "a" }], { cancelWhen: nextCall(r) }),
    ];
    for (const run of cases) {
      const cancelled = nextCancel(r);
      const out = await run();
      expect(out.code).toBe(grpc.status.CANCELLED);
      await cancelled;
    }
    expect(r.recorder.cancelled).toEqual([
      "/test.Test/Unary",
      "/test.Test/ServerStream",
      "/test.Test/ClientStream",
      "/test.Test/Bidi",
    ]);
  });

  it("a cancelled call frees its HTTP/2 stream (server allows one at a time)", async () => {
    const r = await start({ "grpc.max_concurrent_streams": 1 });
    await unary(r.client, { text: "warm" }); // settings exchanged: the limit is known
    for (let i = 0; i < 3; i++) {
      const out = await unary(r.client, { hang: true }, { cancelWhen: nextCall(r) });
      expect(out.code).toBe(grpc.status.CANCELLED);
    }
    // Would queue behind a leaked stream until its deadline.
    const after = await unary(r.client, { text: "next" }, { deadlineMs: 5000 });
    expect(after).toMatchObject({ code: grpc.status.OK, responses: [{ text: "unary:next" }] });
    if ("opened" in r) expect((r.opened as unknown[]).length).toBe(1);
  });
});
