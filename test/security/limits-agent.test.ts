// The agent listener (8150), HTTP/1.1 Upgrade and HTTP/2 extended CONNECT on one port: a
// connection that carries no tunnel (silent, dribbling, refused, asking for something else) is
// closed by the server within the handshake timeout, an HTTP/2 one too once its streams are done;
// a tunnel keeps its connection; HTTP/2 streams per connection and connections are capped.
import type { ClientHttp2Session } from "node:http2";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { dial, TUNNEL_SUBPROTOCOL, TunnelSession } from "../../lib/tunnel/index.ts";
import { AGENT_ID, TOKEN } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import {
  CLOSE_MS,
  checkConnectionCap,
  closedForLimit,
  closedWithin,
  dribbleHeaders,
  h2Exchange,
  openConnection,
  openH2c,
} from "../support/held-connections.ts";
import { until, within } from "../support/until.ts";

const HANDSHAKE_TIMEOUT_MS = 400;

describe("agent listener (8150): connections without a tunnel are closed", () => {
  let kas: InProcessKas;
  let port: number;
  let url: string;
  const sessions: ClientHttp2Session[] = [];
  const h2c = async () => {
    const session = await openH2c(`http://127.0.0.1:${port}`);
    sessions.push(session);
    return session;
  };
  /** An RFC 8441 WebSocket handshake on `session`, with this token. */
  const connectHeaders = (token: string) => ({
    ":method": "CONNECT",
    ":protocol": "websocket",
    ":scheme": "http",
    ":path": "/",
    ":authority": `127.0.0.1:${port}`,
    "sec-websocket-version": "13",
    "sec-websocket-protocol": TUNNEL_SUBPROTOCOL,
    authorization: `Bearer ${token}`,
  });

  beforeAll(async () => {
    kas = await startInProcessKas((config) => {
      config.agent.listen.handshakeTimeoutMs = HANDSHAKE_TIMEOUT_MS;
      config.connectionLimits.maxStreamsPerConnection = 7;
    });
    url = kas.addresses.agent;
    port = Number(new URL(url).port);
  });
  afterAll(async () => {
    for (const session of sessions) session.destroy();
    await kas?.close();
  });

  test("silent, dribbling, refused or asking for something else: closed, over HTTP/1.1 and HTTP/2", async () => {
    const silent = await openConnection(port);
    const slowHeaders = await openConnection(port);
    dribbleHeaders(slowHeaders, 50);
    const h2Silent = await h2c();
    const refused = await h2c();
    const { headers } = await h2Exchange(refused, connectHeaders("not-an-agent-token"));
    expect(headers[":status"]).toBe(401);
    const elsewhere = await h2c();
    expect((await h2Exchange(elsewhere, { ":method": "GET", ":path": "/metrics" })).headers[":status"]).toBe(
      404,
    );
    await Promise.all([
      closedWithin(silent, CLOSE_MS, "a silent connection"),
      closedWithin(slowHeaders, CLOSE_MS, "a connection dribbling headers"),
      closedWithin(h2Silent, CLOSE_MS, "a silent HTTP/2 connection"),
      closedWithin(refused, CLOSE_MS, "an HTTP/2 connection whose handshake was refused"),
      closedWithin(elsewhere, CLOSE_MS, "an HTTP/2 connection that asked for something else"),
    ]);
  });

  test("a tunnel over HTTP/2 keeps its connection past the deadline; the connection says how many streams it takes", async () => {
    const probe = await h2c();
    expect(probe.remoteSettings.maxConcurrentStreams).toBe(7);
    const transport = await dial(url, { http2: true, headers: { authorization: `Bearer ${TOKEN}` } });
    const tunnel = new TunnelSession(transport, "client", { keepAliveIntervalMs: 0 });
    try {
      await until(() => kas.kas.router!.local.tunnels(AGENT_ID).size === 1, 5000, "the tunnel to register");
      // Opened after the tunnel, closed for carrying none: by then the tunnel's connection has
      // been through the same checks, and kept.
      const witness = await h2c();
      await closedWithin(witness, CLOSE_MS, "a silent HTTP/2 connection opened after the tunnel");
      await closedWithin(probe, CLOSE_MS, "the probe connection");
      await within(tunnel.ping(), 5000, "a ping over the tunnel");
      expect(kas.kas.router!.local.tunnels(AGENT_ID).size).toBe(1);
    } finally {
      tunnel.destroy();
    }
  });
});

describe("agent listener in kas: agent.listen.max_connections", () => {
  let kas: InProcessKas;
  beforeAll(async () => {
    kas = await startInProcessKas((config) => {
      config.agent.listen.maxConnections = 2;
    });
  });
  afterAll(async () => {
    await kas?.close();
  });

  test("connections past the cap are closed on arrival; under it again, a new one is served", async () => {
    await checkConnectionCap(
      Number(new URL(kas.addresses.agent).port),
      2,
      "GET / HTTP/1.1\r\nHost: kas\r\n\r\n",
    );
    // Counted where an operator sees floods (the log line is throttled).
    expect(
      await closedForLimit(kas.addresses.observability, "agent", "max connections"),
    ).toBeGreaterThanOrEqual(1);
  });
});
