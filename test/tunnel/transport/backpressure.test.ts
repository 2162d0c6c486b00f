import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, test } from "vitest";
import type { TransportConnection } from "../../../lib/tunnel/transport/index.ts";
import { dialed, readBytes, startServer, VARIANTS } from "./helpers.ts";

const CHUNK = 256 * 1024;
/** Far more than loopback buffers, flow-control windows and stream buffers can absorb together. */
const ATTEMPT = 96 * 1024 * 1024;
const BOUND = 40 * 1024 * 1024;
/** With no 'drain' for this long the writer is considered stalled (absence has no event to wait for). */
const STALL_MS = 400;

/** Writes until the stream stops draining; returns the bytes accepted by write(). */
async function writeUntilStalled(
  from: TransportConnection,
  chunk: Buffer,
): Promise<{ queued: number; maxBuffered: number }> {
  let queued = 0;
  let maxBuffered = 0;
  while (queued < ATTEMPT) {
    const ok = from.stream.write(chunk);
    queued += chunk.length;
    maxBuffered = Math.max(maxBuffered, from.bufferedAmount);
    if (ok) continue;
    const drained = await Promise.race([once(from.stream, "drain").then(() => true), sleep(STALL_MS, false)]);
    maxBuffered = Math.max(maxBuffered, from.bufferedAmount);
    if (!drained) return { queued, maxBuffered };
  }
  return { queued, maxBuffered };
}

describe.each(VARIANTS)("$name", (variant) => {
  test.each(["server to client", "client to server"])(
    "%s: a reader that does not read stalls the writer with bounded buffering, then everything arrives",
    async (direction) => {
      const server = await startServer(variant);
      const client = await dialed(server.url, server.dialOptions);
      const peer = await server.accepted.next();
      const [from, to] = direction === "server to client" ? [peer, client] : [client, peer];
      const chunk = randomBytes(CHUNK);

      const { queued, maxBuffered } = await writeUntilStalled(from, chunk);
      expect(queued).toBeLessThan(BOUND);
      // Above the socket: at most the message being written plus its frame header.
      expect(maxBuffered).toBeLessThanOrEqual(CHUNK + 16);
      expect(from.stream.writableLength).toBeLessThanOrEqual(2 * CHUNK);
      // The slow side holds at most its high-water mark plus one message.
      expect(to.stream.readableLength).toBeLessThanOrEqual(to.stream.readableHighWaterMark + CHUNK);

      const received = await readBytes(to.stream, queued, 30_000);
      expect(received.length).toBe(queued);
      for (let offset = 0; offset < queued; offset += CHUNK) {
        if (!received.subarray(offset, offset + CHUNK).equals(chunk))
          throw new Error(`corrupt data at ${offset}`);
      }
    },
  );
});
