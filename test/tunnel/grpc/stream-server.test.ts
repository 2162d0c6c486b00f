/** Closing a GrpcStreamServer: drain with a grace period, then nothing left behind. */
import { once } from "node:events";
import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { DRAINED_DETAILS } from "../../../lib/tunnel/grpc/index.ts";
import { until } from "../../support/until.ts";
import { bidi, unary } from "./client-calls.ts";
import { type TunnelRig, tunnelRig } from "./rigs.ts";
import type { Req, Res } from "./test-service.ts";

let rig: TunnelRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const within = (ms: number) => ({ signal: AbortSignal.timeout(ms) });

describe("GrpcStreamServer.close()", () => {
  it("lets a running call finish within the grace period while new calls are refused", async () => {
    rig = await tunnelRig();
    const accepted: Duplex[] = [];
    rig.session.server.on("stream", (s) => accepted.push(s));
    const call = rig.client.bidi() as grpc.ClientDuplexStream<Req, Res>;
    const replies: string[] = [];
    call.on("data", (r: Res) => replies.push(r.text));
    const status = once(call, "status", within(5000)) as Promise<[grpc.StatusObject]>;
    call.write({ text: "a" });
    await once(call, "data", within(5000));

    const closing = rig.streamServer.close(5000);
    // The client learns of the GOAWAY and opens a new stream for the next call; it is refused.
    const refused = await unary(rig.client, { text: "late" }, { deadlineMs: 5000 });
    expect(refused.code).toBe(grpc.status.UNAVAILABLE);
    expect(rig.opened).toHaveLength(2);

    call.write({ text: "b" });
    call.end();
    const [s] = await status;
    expect(s.code).toBe(grpc.status.OK);
    expect(replies).toEqual(["A", "B"]);
    await closing;
    expect(rig.streamServer.streams).toBe(0);
    expect(accepted.every((st) => st.closed)).toBe(true);
  });

  it("ends what is still running with UNAVAILABLE when the grace period ends, and resolves once streams are closed", async () => {
    rig = await tunnelRig();
    const cancelled = once(rig.recorder, "cancelled", within(5000));
    const arrived = once(rig.recorder, "call", within(5000));
    const hanging = unary(rig.client, { hang: true });
    await arrived;
    const started = Date.now();
    await rig.streamServer.close(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(await cancelled).toEqual(["/test.Test/Unary"]);
    // The client's cue to call again: the call ends with a status, not with its connection.
    expect(await hanging).toMatchObject({ code: grpc.status.UNAVAILABLE, details: DRAINED_DETAILS });
    expect(rig.streamServer.streams).toBe(0);
  });

  it("also ends streams that never carried a call", async () => {
    rig = await tunnelRig();
    const silent = await rig.session.client.open();
    silent.on("error", () => {});
    await until(() => rig?.streamServer.streams === 1);
    const ended = new Promise((resolve) => silent.once("close", resolve));
    await rig.streamServer.close(100);
    await ended;
    expect(rig.streamServer.streams).toBe(0);
  });

  it("destroys streams injected after close()", async () => {
    rig = await tunnelRig();
    expect((await bidi(rig.client, [{ text: "x" }])).code).toBe(grpc.status.OK);
    await rig.streamServer.close(0);
    const late = await rig.session.client.open();
    const reset = once(late, "error", within(5000));
    late.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    expect((await reset)[0]).toMatchObject({ code: "ECONNRESET" });
    expect(rig.streamServer.streams).toBe(0);
  });
});
