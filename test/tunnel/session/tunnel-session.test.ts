import { once } from "node:events";
import { afterEach, expect, test } from "vitest";
import {
  dial,
  HandshakeError,
  HandshakeRejection,
  serveTunnels,
  type TunnelServer,
  TunnelSession,
} from "../../../lib/tunnel/index.ts";
import { readText } from "../../support/read-all.ts";

let server: TunnelServer<{ agent: string }> | undefined;
afterEach(async () => server?.close(100));

async function start(onSession: (s: TunnelSession<{ agent: string }>) => void = () => {}) {
  server = await serveTunnels<{ agent: string }>({
    host: "127.0.0.1",
    authenticate: (req) => {
      const token = req.headers.authorization;
      if (token !== "Bearer good") throw new HandshakeRejection(401, "bad token");
      return { agent: "agent-1" };
    },
    onSession,
  });
  return server;
}

test("streams flow both ways over one WebSocket and the server knows who is on the other end", async () => {
  const accepted: Array<TunnelSession<{ agent: string }>> = [];
  const srv = await start((s) => {
    accepted.push(s);
    s.on("stream", (st) => st.pipe(st));
  });
  const client = new TunnelSession(
    await dial(srv.url, { headers: { authorization: "Bearer good" } }),
    "client",
  );
  client.on("stream", (st) => {
    st.end(`hello from the agent to ${st.id}`);
    st.resume();
  });

  const up = await client.open();
  up.end("agent -> server");
  expect(await readText(up)).toBe("agent -> server");

  const down = await accepted[0]!.open();
  down.end();
  expect(await readText(down)).toBe("hello from the agent to 2");

  expect(accepted[0]!.identity).toEqual({ agent: "agent-1" });
  expect(accepted[0]!.role).toBe("server");
  const rtt = await client.ping();
  const stats = client.stats;
  expect(stats.rttMs).toBe(rtt);
  expect(stats.bytesOut).toBeGreaterThan("agent -> server".length);
  expect(stats.bytesIn).toBeGreaterThan("hello from the agent to 2".length);
  expect(stats.remoteAddress).toBe("127.0.0.1");
  client.destroy();
});

test("a rejected handshake never becomes a session", async () => {
  const sessions: unknown[] = [];
  const srv = await start((s) => sessions.push(s));
  const err = await dial(srv.url, { headers: { authorization: "Bearer bad" } }).catch((e) => e);
  expect(err).toBeInstanceOf(HandshakeError);
  expect(err).toMatchObject({ status: 401, message: expect.stringMatching(/bad token/) });
  expect(sessions).toHaveLength(0);
});

test("closing one end closes the other", async () => {
  const accepted: Array<TunnelSession<{ agent: string }>> = [];
  const srv = await start((s) => accepted.push(s));
  const client = new TunnelSession(
    await dial(srv.url, { headers: { authorization: "Bearer good" } }),
    "client",
  );
  await client.ping(); // the server side exists by now
  const serverClosed = once(accepted[0]!, "close");
  client.destroy();
  await serverClosed;
  expect(accepted[0]!.closed).toBe(true);
  expect(srv.sessions.size).toBe(0);
});

test("drain: GoAway, in-flight streams finish, then the tunnel closes", async () => {
  const accepted: Array<TunnelSession<{ agent: string }>> = [];
  const srv = await start((s) => {
    accepted.push(s);
    s.on("stream", (st) => st.pipe(st));
  });
  const client = new TunnelSession(
    await dial(srv.url, { headers: { authorization: "Bearer good" } }),
    "client",
  );
  const st = await client.open();
  st.write("first half, ");
  await once(st, "readable");
  const goaway = once(client, "goaway");
  const drained = accepted[0]!.close(10_000);
  await goaway;
  expect(client.draining).toBe(true);
  await expect(client.open()).rejects.toMatchObject({ code: "ERR_YAMUX_REMOTE_GOAWAY" });
  const reading = readText(st);
  st.end("second half");
  expect(await reading).toBe("first half, second half");
  await drained;
  expect(accepted[0]!.closed).toBe(true);
});

test("drain gives up after the grace period and cuts what is left", async () => {
  const accepted: Array<TunnelSession<{ agent: string }>> = [];
  const srv = await start((s) => {
    accepted.push(s);
    s.on("stream", (st) => st.resume()); // never ends its side
  });
  const client = new TunnelSession(
    await dial(srv.url, { headers: { authorization: "Bearer good" } }),
    "client",
  );
  const st = await client.open();
  st.on("error", () => {});
  st.write("x");
  await client.ping();
  const closed = once(client, "close");
  await accepted[0]!.close(50);
  await closed;
  expect(st.destroyed).toBe(true);
});

test("'draining' fires once per end at the first GoAway, whichever end sent it", async () => {
  const accepted: Array<TunnelSession<{ agent: string }>> = [];
  const srv = await start((s) => {
    accepted.push(s);
    s.on("stream", (st) => st.pipe(st));
  });
  const client = new TunnelSession(
    await dial(srv.url, { headers: { authorization: "Bearer good" } }),
    "client",
  );
  await client.ping(); // the server's session is up
  const server = accepted[0]!;
  const seen: string[] = [];
  server.on("draining", () => seen.push(`server draining, draining=${server.draining}`));
  client.on("draining", () => seen.push(`client draining, draining=${client.draining}`));

  const clientDraining = once(client, "draining");
  server.goAway(); // the sender's own GoAway
  await clientDraining; // the receiver's
  server.goAway();
  client.goAway(); // a GoAway back, and a drain, change nothing: both already drain
  await server.close(1000);
  expect(seen).toEqual(["server draining, draining=true", "client draining, draining=true"]);
});
