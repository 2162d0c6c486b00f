import { once } from "node:events";
import { afterEach, expect, test } from "vitest";
import {
  HandshakeError,
  HandshakeRejection,
  serveTunnels,
  TunnelClient,
  type TunnelServer,
  type TunnelSession,
} from "../../../lib/tunnel/index.ts";
import { readText } from "../../support/read-all.ts";

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** A tunnel server that echoes streams and records every session and every handshake attempt. */
async function echoServer(port = 0, accept = true) {
  const sessions: TunnelSession[] = [];
  const attempts: number[] = [];
  const server = await serveTunnels<undefined>({
    host: "127.0.0.1",
    port,
    authenticate: () => {
      attempts.push(performance.now());
      if (!accept) throw new HandshakeRejection(401, "token revoked");
      return undefined;
    },
    onSession: (s) => {
      sessions.push(s);
      s.on("stream", (st) => st.pipe(st));
    },
  });
  cleanup.push(() => server.close(100));
  return { server, sessions, attempts };
}

function client(
  server: TunnelServer<undefined>,
  extra: Partial<ConstructorParameters<typeof TunnelClient>[0]> = {},
) {
  const c = new TunnelClient({
    url: server.url,
    backoff: { initialMs: 20, maxMs: 200, jitter: 0 },
    ...extra,
  });
  cleanup.push(() => c.stop(100));
  return c.start();
}

test("keeps a tunnel up and carries streams both ways", async () => {
  const { server, sessions } = await echoServer();
  const served: string[] = [];
  const c = client(server, {
    onStream: (st) => {
      served.push(`stream ${st.id}`);
      st.end("from the agent");
    },
  });
  const st = await c.open();
  st.end("ping");
  expect(await readText(st)).toBe("ping");
  const down = await sessions[0]!.open();
  down.end();
  expect(await readText(down)).toBe("from the agent");
  expect(served).toEqual(["stream 2"]);
});

test("rejected credentials back off like any failure: no tight retry loop", async () => {
  const { server, attempts } = await echoServer(0, false);
  const c = client(server, { backoff: { initialMs: 20, maxMs: 160, factor: 2, jitter: 0 } });
  const retries: Array<{ delayMs: number; error: Error }> = [];
  c.on("retry", (r) => retries.push(r));
  while (retries.length < 5) await once(c, "retry");
  expect(retries.map((r) => r.delayMs)).toEqual([20, 40, 80, 160, 160]);
  expect(retries[0]!.error).toBeInstanceOf(HandshakeError);
  expect(retries[0]!.error).toMatchObject({ status: 401, message: expect.stringMatching(/token revoked/) });
  // Each attempt came no sooner than the delay announced before it.
  for (let i = 1; i < 5; i++) {
    expect(attempts[i]! - attempts[i - 1]!).toBeGreaterThanOrEqual(retries[i - 1]!.delayMs - 1);
  }
});

test("reconnects when the server comes back after a restart", async () => {
  const first = await echoServer();
  const port = first.server.listener.address.port;
  const c = client(first.server);
  await c.ready(5000);
  const disconnected = once(c, "disconnected");
  await first.server.close(0);
  await disconnected;
  expect(c.active).toBeUndefined();
  const second = await echoServer(port);
  const [session] = (await once(c, "connected")) as [TunnelSession];
  expect(second.sessions).toHaveLength(1);
  const st = await session.open();
  st.end("after restart");
  expect(await readText(st)).toBe("after restart");
});

test("GoAway: the replacement is dialed before the old tunnel lets its streams finish", async () => {
  const { server, sessions } = await echoServer();
  const c = client(server);
  const old = await c.ready(5000);
  const inFlight = await old.open();
  inFlight.write("started before the drain, ");
  await once(inFlight, "readable");

  const events: string[] = [];
  c.on("connected", () => events.push("replacement up"));
  old.once("close", () => events.push("old closed"));
  const drained = sessions[0]!.drain(10_000);
  const [replacement] = (await once(c, "connected")) as [TunnelSession];
  expect(replacement).not.toBe(old);
  expect(c.active).toBe(replacement);
  expect(old.closed).toBe(false); // still carrying its stream

  const reading = readText(inFlight);
  inFlight.end("finished after it");
  expect(await reading).toBe("started before the drain, finished after it");
  await drained;
  expect(events).toEqual(["replacement up", "old closed"]);

  const next = await c.open();
  next.end("on the new tunnel");
  expect(await readText(next)).toBe("on the new tunnel");
  expect(sessions[1]!.stats.bytesIn).toBeGreaterThan(0);
});

test("stop() ends every tunnel and dials no more", async () => {
  const { server, sessions, attempts } = await echoServer();
  const c = new TunnelClient({ url: server.url, backoff: { initialMs: 10, jitter: 0 } }).start();
  await c.ready(5000);
  const serverSide = once(sessions[0]!, "close");
  await c.stop(1000);
  await serverSide;
  expect(c.sessions.size).toBe(0);
  const before = attempts.length;
  await server.close(0);
  await expect(c.ready(50)).rejects.toThrow(/stopped/);
  expect(attempts.length).toBe(before);
});
