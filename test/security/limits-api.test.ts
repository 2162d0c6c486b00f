// The API for GitLab (8153), HTTP/1.1 and HTTP/2 (gRPC) on one port: connections held open
// without credentials, or idle, or dribbling a request, are closed by the server within short
// configured deadlines; a call in flight is not cut; past the connection cap, connections are refused.
import { once } from "node:events";
import type { ClientHttp2Session } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ApiRouteTable, createGitLabRpcServer, serveApi } from "../../cmd/kas/api/index.ts";
import { ReadinessChecks } from "../../cmd/kas/observability/index.ts";
import { addViewsWatchService } from "../../modules/cluster_views/kas/watch-service.ts";
import type { ConnectionLimits, HttpListener } from "../../tool/http/serve/index.ts";
import { gitlabJwt, silentLogger } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { bearer, gitlabServiceClients, grpcTarget } from "../support/gitlab-grpc.ts";
import {
  CLOSE_MS,
  checkConnectionCap,
  closedForLimit,
  closedWithin,
  EMPTY_GRPC_MESSAGE,
  h2Exchange,
  heldRequests,
  idleAfter,
  openH2c,
} from "../support/held-connections.ts";
import { MemoryViewsHub } from "../support/memory-views-hub.ts";
import { until, within } from "../support/until.ts";

const LIMITS: ConnectionLimits = {
  headerTimeoutMs: 300,
  bodyTimeoutMs: 300,
  idleTimeoutMs: 300,
  maxConnections: 100,
  maxStreamsPerConnection: 7,
  unauthenticatedTimeoutMs: 300,
};

const grpcHeaders = (path: string, jwt?: string) => ({
  ":method": "POST",
  ":path": path,
  "content-type": "application/grpc",
  te: "trailers",
  ...(jwt && { authorization: `bearer ${jwt}` }),
});
const WATCH = "/cluster_views.v1.ClusterViewsWatchService/WatchAgentViews";
const HEALTH_WATCH = "/grpc.health.v1.Health/Watch";

describe("API for GitLab (8153): held connections are closed", () => {
  const secret = new Uint8Array(32).fill(7);
  const hub = new MemoryViewsHub();
  let listener: HttpListener;
  let port: number;
  let url: string;
  let jwt: string;
  const sessions: ClientHttp2Session[] = [];
  const h2c = async () => {
    const session = await openH2c(url);
    sessions.push(session);
    return session;
  };

  beforeAll(async () => {
    const rpc = createGitLabRpcServer({
      secret,
      readiness: new ReadinessChecks(),
      log: silentLogger(),
      limits: LIMITS,
    });
    addViewsWatchService(rpc, hub);
    rpc.start();
    listener = await serveApi({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      secret,
      routes: new ApiRouteTable(),
      grpc: rpc.connections,
      limits: LIMITS,
    });
    url = listener.url;
    port = listener.port;
    jwt = await gitlabJwt(secret, { iss: "gitlab.example.com" });
  });
  afterAll(async () => {
    for (const session of sessions) session.destroy();
    await listener?.close(0);
  });

  test("HTTP/1.1: a silent connection is closed; headers that never end and a body that never finishes get 408", async () => {
    const answers = await heldRequests(port, "/", { "gitlab-kas-api-request": jwt });
    // Silent, it is neither HTTP/1.1 nor HTTP/2 yet: closed without a word.
    expect(answers.silent).toBe("");
    expect(answers.slowHeaders).toMatch(/^HTTP\/1\.1 408 /);
  });

  test("HTTP/1.1: a keep-alive connection idle after its answer is closed", async () => {
    expect(await idleAfter(port, "GET / HTTP/1.1\r\nHost: kas\r\n\r\n")).toMatch(/^HTTP\/1\.1 401 /);
  });

  test("HTTP/2: connections without a valid JWT are closed, silent, refused, or with a call still open", async () => {
    const silent = await h2c();
    const refused = await h2c();
    const { headers, trailers } = await h2Exchange(
      refused,
      grpcHeaders(WATCH, "not-a-jwt"),
      EMPTY_GRPC_MESSAGE,
    );
    // A refusal is trailers-only: the status comes with the headers.
    expect(trailers["grpc-status"] ?? headers["grpc-status"]).toBe(String(grpc.status.UNAUTHENTICATED));
    // The health service needs no JWT, so its watch keeps a call open: not idle, yet unauthenticated.
    const watching = await h2c();
    const health = watching.request(grpcHeaders(HEALTH_WATCH));
    health.on("error", () => {});
    health.end(EMPTY_GRPC_MESSAGE);
    await within(once(health, "response"), 5000, "the health watch to start");
    await Promise.all([
      closedWithin(silent, CLOSE_MS, "a silent HTTP/2 connection"),
      closedWithin(refused, CLOSE_MS, "an HTTP/2 connection whose call was refused"),
      closedWithin(watching, CLOSE_MS, "an unauthenticated HTTP/2 connection with a call open"),
    ]);
  });

  test("HTTP/2: an authenticated connection is closed once idle, and it may open only so many streams", async () => {
    const session = await h2c();
    expect(session.remoteSettings.maxConcurrentStreams).toBe(LIMITS.maxStreamsPerConnection);
    const watch = session.request(grpcHeaders(WATCH, jwt));
    watch.on("error", () => {});
    watch.end(EMPTY_GRPC_MESSAGE);
    await within(once(watch, "response"), 5000, "the authenticated watch to start");
    watch.close();
    await closedWithin(session, CLOSE_MS, "an authenticated HTTP/2 connection left idle");
    await until(() => hub.subscribers === 0, 5000, "the cancelled watch to unsubscribe");
  });

  test("a call in flight outlives every deadline: GitLab's watch keeps its connection and its events", async () => {
    const client = new (gitlabServiceClients().ClusterViewsWatch)(
      grpcTarget(url),
      grpc.credentials.createInsecure(),
    );
    try {
      const call = (
        client as unknown as {
          WatchAgentViews(r: object, m: grpc.Metadata): grpc.ClientReadableStream<{ event_type: string }>;
        }
      ).WatchAgentViews({ agent_id: "42" }, bearer(jwt));
      const events: string[] = [];
      call.on("data", (e: { event_type: string }) => events.push(e.event_type));
      call.on("error", () => {});
      await until(() => hub.subscribers === 1, 5000, "the watch to subscribe");
      // Opened after the watch, closed by every deadline at once: once it is gone, so are the
      // watch connection's header, idle and unauthenticated deadlines.
      const witness = await h2c();
      await closedWithin(witness, CLOSE_MS, "a silent HTTP/2 connection opened after the watch");
      hub.presence("42", true);
      await until(() => events.includes("connected"), 5000, "the watch's event after the deadlines");
      expect(hub.subscribers).toBe(1);
      call.cancel();
    } finally {
      client.close();
    }
  });
});

describe("API for GitLab (8153) in kas: connection_limits.max_connections", () => {
  let kas: InProcessKas;
  beforeAll(async () => {
    kas = await startInProcessKas((config) => {
      config.connectionLimits.maxConnections = 2;
    });
  });
  afterAll(async () => {
    await kas?.close();
  });

  test("connections past the cap are closed on arrival; under it again, a new one is served", async () => {
    await checkConnectionCap(
      Number(new URL(kas.addresses.api!).port),
      2,
      "GET / HTTP/1.1\r\nHost: kas\r\n\r\n",
    );
    // Counted where an operator sees floods (the log line is throttled).
    expect(
      await closedForLimit(kas.addresses.observability, "api", "max connections"),
    ).toBeGreaterThanOrEqual(1);
  });
});
