// The private kas-to-kas listener (8155), a tunnel listener like the agents' but authenticated by
// the replicas' JWT: a connection that carries no tunnel (silent, dribbling, refused, asking for
// something else) is closed within connection_limits.header_timeout (its handshake deadline);
// HTTP/2 streams per connection and connections are capped. Clustered kas: a real redis-server.
import type { ClientHttp2Session } from "node:http2";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TUNNEL_SUBPROTOCOL } from "../../lib/tunnel/index.ts";
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
import { RedisServer } from "../support/redis-server.ts";

describe("private API (8155): connections without a tunnel are closed", () => {
  let redis: RedisServer;
  let kas: InProcessKas;
  let port: number;
  const sessions: ClientHttp2Session[] = [];
  const h2c = async () => {
    const session = await openH2c(`http://127.0.0.1:${port}`);
    sessions.push(session);
    return session;
  };

  beforeAll(async () => {
    redis = await RedisServer.start();
    kas = await startInProcessKas(
      (config) => {
        config.connectionLimits.headerTimeoutMs = 400;
        config.connectionLimits.maxStreamsPerConnection = 7;
      },
      { redis: redis.connection as { host: string; port: number } },
    );
    port = Number(new URL(kas.addresses.privateApi!).port);
  });
  afterAll(async () => {
    for (const session of sessions) session.destroy();
    await kas?.close();
    await redis?.close();
  });

  test("silent, dribbling, refused or asking for something else: closed, over HTTP/1.1 and HTTP/2", async () => {
    const silent = await openConnection(port);
    const slowHeaders = await openConnection(port);
    dribbleHeaders(slowHeaders, 50);
    const h2Silent = await h2c();
    expect(h2Silent.remoteSettings.maxConcurrentStreams).toBe(7);
    const refused = await h2c();
    const { headers } = await h2Exchange(refused, {
      ":method": "CONNECT",
      ":protocol": "websocket",
      ":scheme": "http",
      ":path": "/",
      ":authority": `127.0.0.1:${port}`,
      "sec-websocket-version": "13",
      "sec-websocket-protocol": TUNNEL_SUBPROTOCOL,
      authorization: "Bearer not-a-replica-token",
    });
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
});

describe("private API in kas: connection_limits.max_connections", () => {
  let redis: RedisServer;
  let kas: InProcessKas;
  beforeAll(async () => {
    redis = await RedisServer.start();
    kas = await startInProcessKas(
      (config) => {
        config.connectionLimits.maxConnections = 2;
      },
      { redis: redis.connection as { host: string; port: number } },
    );
  });
  afterAll(async () => {
    await kas?.close();
    await redis?.close();
  });

  test("connections past the cap are closed on arrival; under it again, a new one is served", async () => {
    const port = Number(new URL(kas.addresses.privateApi!).port);
    await checkConnectionCap(port, 2, "GET / HTTP/1.1\r\nHost: kas\r\n\r\n");
    // Counted where an operator sees floods (the log line is throttled).
    expect(
      await closedForLimit(kas.addresses.observability, "private_api", "max connections"),
    ).toBeGreaterThanOrEqual(1);
  });
});
