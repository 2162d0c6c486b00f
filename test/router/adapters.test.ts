import * as grpc from "@grpc/grpc-js";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrpcStreamServer, createTunnelChannel } from "../../lib/tunnel/grpc/index.ts";
import { Kind, StreamDispatcher } from "../../lib/tunnel/header/index.ts";
import { serveHttp, TunnelDispatcher } from "../../lib/tunnel/http/index.ts";
import { TunnelClient } from "../../lib/tunnel/session/index.ts";
import { RedisServer } from "../support/redis-server.ts";
import { TestClient, testServer } from "../tunnel/grpc/test-service.ts";
import { type Replica, startReplica } from "./harness.ts";

// The adapters take an `open(signal)` and know nothing of routing: here they run, unchanged,
// over router.dial from a replica that does not hold the agent's tunnel (one peer hop).
describe("gRPC and HTTP adapters over router.dial", () => {
  let redis: RedisServer;
  let a: Replica;
  let b: Replica;
  let agent: TunnelClient;
  const grpcServer = testServer().server;
  const grpcStreams = createGrpcStreamServer(grpcServer);
  const http = serveHttp((req, res) => res.end(`agent 901 got ${req.method} ${req.url}`));

  beforeAll(async () => {
    redis = await RedisServer.start();
    [a, b] = await Promise.all(["a", "b"].map((n) => startReplica(n, redis)));
    const dispatcher = new StreamDispatcher();
    dispatcher.register(Kind.KIND_GRPC, (stream) => grpcStreams.inject(stream));
    dispatcher.register(Kind.KIND_HTTP, (stream) => http.handle(stream));
    agent = new TunnelClient({
      url: a.agents.url,
      dial: { headers: { "x-agent-id": "901" } },
      onStream: (stream) => void dispatcher.handle(stream, undefined),
    }).start();
    await agent.ready(5000);
  });
  afterAll(async () => {
    await grpcStreams.close(0);
    grpcServer.forceShutdown();
    await http.close(100);
    await agent?.close(100);
    await Promise.all([a, b].map((r) => r?.close()));
    await redis?.close();
  });

  it("a grpc-js client reaches the agent's gRPC server", async () => {
    const channel = createTunnelChannel(b.router.opener("901", { kind: Kind.KIND_GRPC }));
    const client = new TestClient("agent-901", grpc.credentials.createInsecure(), {
      channelOverride: channel,
    });
    try {
      const res = await new Promise<{ text: string }>((resolve, reject) =>
        client.makeUnaryRequest(
          "/test.Test/Unary",
          (v: unknown) => Buffer.from(JSON.stringify(v)),
          (buf: Buffer) => JSON.parse(buf.toString()),
          { text: "hi" },
          (err: grpc.ServiceError | null, value?: { text: string }) => (err ? reject(err) : resolve(value!)),
        ),
      );
      expect(res.text).toBe("unary:hi");
      expect(b.router.peerTunnels).toBe(1); // it went through A
    } finally {
      client.close();
    }
  });

  it("an undici request reaches the agent's HTTP server", async () => {
    const open = b.router.opener("901", { kind: Kind.KIND_HTTP });
    const dispatcher = new TunnelDispatcher((_origin, { signal }) => open(signal));
    try {
      const res = await request("http://kubernetes.default.svc/api?x=1", { dispatcher });
      expect(res.statusCode).toBe(200);
      expect(await res.body.text()).toBe("agent 901 got GET /api?x=1");
    } finally {
      await dispatcher.close();
    }
  });
});
