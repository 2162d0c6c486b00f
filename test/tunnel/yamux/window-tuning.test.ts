// Receive-window auto-tuning across the streams of one session, on a long path (50 ms each way):
// a stream with a fast reader starts from what an earlier stream of the session learned of the
// path, and a stream nobody reads still holds its peer to one initial window.
import { once } from "node:events";
import { afterEach, expect, test } from "vitest";
import { INITIAL_WINDOW, Session, type YamuxStream } from "../../../lib/tunnel/yamux/index.ts";
import { delayedStreamPair } from "../../support/loopback.ts";
import { until } from "../../support/until.ts";

const MAX = 4 * 1024 * 1024;
const BLOCK = Buffer.alloc(256 * 1024, 7);

let sessions: Session[] = [];
afterEach(() => {
  for (const s of sessions) s.destroy();
  sessions = [];
});

function sessionsOver(keepAliveIntervalMs: number): { client: Session; server: Session } {
  const [a, b] = delayedStreamPair(50);
  const opts = { keepAliveIntervalMs, maxStreamWindow: MAX };
  const client = new Session(a, { ...opts, client: true });
  const server = new Session(b, { ...opts, client: false });
  sessions = [client, server];
  return { client, server };
}

async function longPath(): Promise<{ client: Session; server: Session }> {
  const { client, server } = sessionsOver(60_000);
  // The first keepalive ping gives auto-tuning its RTT (about 100 ms) on both sides.
  await until(() => client.rttMs > 0 && server.rttMs > 0, 5000, "the first RTT samples");
  return { client, server };
}

/** Sends `bytes` on a new stream to a reader that reads all; resolves with the receiving stream. */
async function transfer(client: Session, server: Session, bytes: number): Promise<YamuxStream> {
  const accepted = server.accept();
  const s = await client.open();
  const remote = await accepted;
  let got = 0;
  remote.on("data", (c: Buffer) => {
    got += c.length;
  });
  const ended = once(remote, "end");
  for (let sent = 0; sent < bytes; sent += BLOCK.length) if (!s.write(BLOCK)) await once(s, "drain");
  s.end();
  await ended;
  remote.end(); // both sides closed: the stream ends cleanly, no reset
  expect(got).toBe(bytes);
  return remote;
}

test("a new stream with a fast reader grows at its first grant to the window an earlier stream reached", async () => {
  const { client, server } = await longPath();
  const first = await transfer(client, server, 16 * 1024 * 1024);
  expect(first.receiveWindow).toBe(MAX); // grown, and no further than the maximum
  // Half a megabyte is two grants at most: doubling alone would have reached 1 MiB at best.
  const second = await transfer(client, server, 512 * 1024);
  expect(second.receiveWindow).toBe(MAX);
});

test("a stream nobody reads keeps the initial window, whatever the session learned: its peer buffers one window", async () => {
  const { client, server } = await longPath();
  expect((await transfer(client, server, 16 * 1024 * 1024)).receiveWindow).toBe(MAX);
  const accepted = server.accept();
  const s = await client.open();
  let written = 0;
  // Left blocked on a window that never opens; the sessions' end (afterEach) takes it away.
  void (async () => {
    while (written < 8 * 1024 * 1024) {
      written += BLOCK.length;
      if (!s.write(BLOCK)) await once(s, "drain");
    }
  })();
  const remote = await accepted; // never read
  await until(() => remote.readableLength === INITIAL_WINDOW, 5000, "one full window buffered");
  await client.ping(); // anything the sender could still send has arrived by now
  await server.ping();
  expect(remote.readableLength).toBe(INITIAL_WINDOW);
  expect(remote.receiveWindow).toBe(INITIAL_WINDOW);
  expect(written).toBeLessThan(8 * 1024 * 1024); // the sender is still held back
});

test("with keepalive off, a fast reader's stream still grows: its first full window asks for one RTT sample", async () => {
  const { client, server } = sessionsOver(0);
  expect(server.rttMs).toBe(0); // no keepalive: no ping of its own
  const first = await transfer(client, server, 16 * 1024 * 1024);
  expect(server.rttMs).toBeGreaterThan(0);
  expect(client.rttMs).toBe(0); // only the receiving side needed a sample
  expect(first.receiveWindow).toBeGreaterThan(INITIAL_WINDOW);
});
