import { once } from "node:events";
import type { Duplex } from "node:stream";
import { afterEach, expect, test } from "vitest";
import { FrameDecoder, FrameType, type YamuxStream } from "../../../lib/tunnel/yamux/index.ts";
import { until } from "../../support/until.ts";
import { type SessionPair, sessionPair } from "./harness.ts";

let pair: SessionPair | undefined;
afterEach(() => pair?.close());

/**
 * Records the buffers a session hands its connection: one entry per write() call, except that the
 * calls made while the connection is corked (which leave as one writev) join the entry of the first.
 */
function recordWrites(conn: Duplex): Buffer[][] {
  const writes: Buffer[][] = [];
  const write = conn.write.bind(conn);
  let lastCorked = false;
  conn.write = ((chunk: Buffer, ...rest: unknown[]) => {
    const corked = conn.writableCorked > 0;
    if (corked && lastCorked) writes.at(-1)!.push(Buffer.from(chunk));
    else writes.push([Buffer.from(chunk)]);
    lastCorked = corked;
    return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof conn.write;
  return writes;
}

function dataPayloads(bytes: Buffer): string[] {
  const out: string[] = [];
  const d = new FrameDecoder(1 << 20, (h, p) => {
    if (h.type === FrameType.Data) out.push(Buffer.from(p ?? []).toString());
  });
  d.push(bytes);
  return out;
}

async function openedPair(): Promise<{ local: YamuxStream; remote: YamuxStream }> {
  pair = await sessionPair();
  const accepted = pair.server.accept();
  const local = await pair.client.open();
  local.write("hello");
  const remote = await accepted;
  await once(remote, "readable");
  remote.read();
  return { local, remote };
}

test("the chunks of one writev leave in one write to the connection (node:http2's HEADERS and DATA)", async () => {
  const { local, remote } = await openedPair();
  const writes = recordWrites(pair!.sockets[0]);
  local.cork();
  local.write("headers");
  local.write("data-frame-head");
  local.write("message");
  local.uncork();
  let received = "";
  remote.on("data", (c: Buffer) => {
    received += c.toString();
  });
  await until(() => received.length >= 29, 5000, "the three chunks at the far end");
  expect(received).toBe("headersdata-frame-headmessage");
  expect(writes).toHaveLength(1);
  // Small chunks are joined into one frame: the far end takes one frame, not three.
  expect(dataPayloads(writes[0]![0]!)).toEqual(["headersdata-frame-headmessage"]);
});

test("a writev of large chunks leaves as one frame per chunk, together in one write", async () => {
  const { local, remote } = await openedPair();
  const writes = recordWrites(pair!.sockets[0]);
  const a = Buffer.alloc(20 * 1024, "a");
  const b = Buffer.alloc(20 * 1024, "b");
  local.cork();
  local.write(a);
  local.write(b);
  local.uncork();
  let received = 0;
  remote.on("data", (c: Buffer) => {
    received += c.length;
  });
  await until(() => received === a.length + b.length, 5000, "both chunks at the far end");
  // Payloads this large go by reference: header, payload, header, payload in one corked write.
  const frames = dataPayloads(Buffer.concat(writes.flat()));
  expect(frames).toEqual([a.toString(), b.toString()]);
  expect(writes).toHaveLength(1);
});

test("a single small write still goes out at once, in the same tick", async () => {
  const { local } = await openedPair();
  const writes = recordWrites(pair!.sockets[0]);
  local.write("ping");
  expect(writes).toHaveLength(1);
  expect(dataPayloads(writes[0]![0]!)).toEqual(["ping"]);
});
