import { Gauge } from "prom-client";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  createKasMetrics,
  type Logger,
  ReadinessChecks,
  serveObservability,
} from "../../../cmd/kas/observability/index.ts";
import { dial, serveTunnels, TunnelSession } from "../../../lib/tunnel/index.ts";
import { rawExchange } from "../../support/raw-http.ts";
import { memoryLogger } from "../auth/helpers.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start(paths?: { metrics?: string; liveness?: string; readiness?: string }, log?: Logger) {
  const metrics = createKasMetrics();
  const readiness = new ReadinessChecks({ timeoutMs: 200 });
  const server = await serveObservability({
    listen: { host: "127.0.0.1", port: 0 },
    registry: metrics.registry,
    readiness,
    ...(paths && { paths }),
    ...(log && { log }),
  });
  cleanups.push(() => server.close());
  return { metrics, readiness, server };
}

function metricValue(text: string, name: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (line === undefined) throw new Error(`no ${name} in metrics`);
  return Number(line.split(" ").at(-1));
}

describe("observability listener", () => {
  test("liveness: 200 ok", async () => {
    const { server } = await start();
    const res = await fetch(`${server.url}/liveness`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok\n");
  });

  test("readiness: named checks; failing or slow ones make it 503 and say why", async () => {
    const { server, readiness } = await start();
    let res = await fetch(`${server.url}/readiness`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ready", checks: [] });

    readiness.add("gitlab", () => {});
    const removeRedis = readiness.add("redis", async () => {
      throw new Error("connect ECONNREFUSED 127.0.0.1:6379");
    });
    readiness.add(
      "slow",
      (signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
    );
    res = await fetch(`${server.url}/readiness`);
    expect(res.status).toBe(503);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      status: "not ready",
      checks: [
        { name: "gitlab", ok: true },
        { name: "redis", ok: false, error: "connect ECONNREFUSED 127.0.0.1:6379" },
        { name: "slow", ok: false, error: "no answer within 200 ms" },
      ],
    });

    removeRedis();
    readiness.remove("slow");
    res = await fetch(`${server.url}/readiness`);
    expect(res.status).toBe(200);
    expect(readiness.names).toEqual(["gitlab"]);
  });

  test("metrics: Prometheus text with process metrics, auth results and request durations by route and status", async () => {
    const { server, metrics } = await start();
    metrics.agentAuth.inc({ result: "ok" });
    metrics.agentAuth.inc({ result: "unauthenticated" });
    const done = metrics.requests.start("/api/v4/kubernetes/{agent_id}");
    done(200);
    metrics.requests.observe("/gitlab.agent.Foo/Bar", "UNAVAILABLE", 0.02);
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    expect(text).toContain("kas_process_cpu_seconds_total");
    expect(text).toContain('kas_agent_authentications_total{result="ok"} 1');
    expect(text).toContain('kas_agent_authentications_total{result="unauthenticated"} 1');
    expect(text).toContain(
      'kas_request_duration_seconds_count{route="/api/v4/kubernetes/{agent_id}",status="200"} 1',
    );
    expect(text).toContain(
      'kas_request_duration_seconds_count{route="/gitlab.agent.Foo/Bar",status="UNAVAILABLE"} 1',
    );
  });

  test("metrics: tunnels, connected agents, open streams and bytes from real tunnels", async () => {
    const { server, metrics } = await start();
    const tunnels = await serveTunnels<{ agentId: string }>({
      host: "127.0.0.1",
      port: 0,
      authenticate: (req) => ({ agentId: String(req.headers["x-agent"]) }),
      onSession: (s) => {
        metrics.tunnels.track(s, s.identity.agentId);
        s.on("stream", (st) => st.pipe(st));
      },
    });
    cleanups.push(() => tunnels.close(100));
    const clients: TunnelSession[] = [];
    for (const agent of ["1", "1", "2"]) {
      const session = new TunnelSession(await dial(tunnels.url, { headers: { "x-agent": agent } }), "client");
      clients.push(session);
      cleanups.push(() => session.destroy());
    }
    const stream = await clients[0]!.open();
    const payload = Buffer.alloc(50_000, 1);
    stream.write(payload);
    let echoed = 0;
    await new Promise<void>((resolve) => {
      stream.on("data", (chunk: Buffer) => {
        echoed += chunk.length;
        if (echoed === payload.length) resolve();
      });
    });
    let text = await (await fetch(`${server.url}/metrics`)).text();
    expect(metricValue(text, "kas_tunnels")).toBe(3);
    expect(metricValue(text, "kas_connected_agents")).toBe(2);
    expect(metricValue(text, "kas_tunnel_open_streams")).toBe(1);
    expect(metricValue(text, "kas_tunnel_received_bytes_total")).toBeGreaterThanOrEqual(payload.length);
    expect(metricValue(text, "kas_tunnel_sent_bytes_total")).toBeGreaterThanOrEqual(payload.length);
    // One pass over the tunnels per scrape for the three sums (10,000 tunnels: the loop waits on it).
    const reads = [...tunnels.sessions].map((s) => vi.spyOn(s, "stats", "get"));
    text = await (await fetch(`${server.url}/metrics`)).text();
    expect(metricValue(text, "kas_tunnel_open_streams")).toBe(1);
    for (const read of reads) expect(read).toHaveBeenCalledTimes(1);
    for (const read of reads) read.mockRestore();

    const closed = [...tunnels.sessions].map((s) => new Promise((resolve) => s.once("close", resolve)));
    for (const c of clients) c.destroy();
    await Promise.all(closed);
    text = await (await fetch(`${server.url}/metrics`)).text();
    expect(metricValue(text, "kas_tunnels")).toBe(0);
    expect(metricValue(text, "kas_connected_agents")).toBe(0);
    expect(metricValue(text, "kas_tunnel_received_bytes_total")).toBeGreaterThanOrEqual(payload.length);
  });

  test("metrics: the agent listener's handshakes, read from its acceptor at scrape time", async () => {
    const { server, metrics } = await start();
    let text = await (await fetch(`${server.url}/metrics`)).text();
    expect(metricValue(text, "kas_agent_handshakes_pending")).toBe(0); // nothing watched yet
    let release!: () => void;
    const authenticating = new Promise<void>((resolve) => {
      release = resolve;
    });
    let arrived!: () => void;
    const inAuthentication = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const tunnels = await serveTunnels({
      host: "127.0.0.1",
      port: 0,
      maxPendingHandshakes: 1,
      authenticate: async () => {
        arrived();
        await authenticating;
      },
      onSession: () => {},
    });
    cleanups.push(() => tunnels.close(100));
    metrics.agentHandshakes.watch(() => tunnels.listener.acceptor.handshakeStats);
    const first = dial(tunnels.url);
    await inAuthentication;
    // The second finds the one slot taken, with none held back by a pacer: a flat Retry-After.
    await expect(dial(tunnels.url)).rejects.toMatchObject({ status: 503 });
    text = await (await fetch(`${server.url}/metrics`)).text();
    expect(metricValue(text, "kas_agent_handshakes_pending")).toBe(1);
    expect(metricValue(text, "kas_agent_handshakes_paced")).toBe(0);
    expect(text).toContain('kas_agent_handshake_pending_limit_refusals_total{retry="flat"} 1');
    expect(text).toContain('kas_agent_handshake_pending_limit_refusals_total{retry="scheduled"} 0');
    release();
    const session = new TunnelSession(await first, "client");
    cleanups.push(() => session.destroy());
    text = await (await fetch(`${server.url}/metrics`)).text();
    expect(metricValue(text, "kas_agent_handshakes_pending")).toBe(0);

    // Each figure under its own name (the pacer's are driven for real in the transport's tests).
    metrics.agentHandshakes.watch(() => ({
      pending: 7,
      paced: 5,
      refusedScheduled: 40,
      refusedFlat: 2,
      pacedCapacityPerSecond: 86.5,
    }));
    text = await (await fetch(`${server.url}/metrics`)).text();
    expect(metricValue(text, "kas_agent_handshakes_pending")).toBe(7);
    expect(metricValue(text, "kas_agent_handshakes_paced")).toBe(5);
    expect(metricValue(text, "kas_agent_handshake_capacity_per_second")).toBe(86.5);
    expect(text).toContain('kas_agent_handshake_pending_limit_refusals_total{retry="scheduled"} 40');
    expect(text).toContain('kas_agent_handshake_pending_limit_refusals_total{retry="flat"} 2');
  });

  test("configured paths; other paths 404; other methods 405; HEAD has no body", async () => {
    const { server } = await start({ metrics: "/prom", liveness: "/live", readiness: "/ready" });
    expect((await fetch(`${server.url}/prom`)).status).toBe(200);
    expect((await fetch(`${server.url}/live`)).status).toBe(200);
    expect((await fetch(`${server.url}/ready?verbose=1`)).status).toBe(200);
    expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
    const post = await fetch(`${server.url}/live`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    const head = await fetch(`${server.url}/live`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  test("a scrape that fails is a 500 and a log line, and the server carries on; CONNECT is a 405", async () => {
    const logs = memoryLogger();
    const { server, metrics } = await start(undefined, logs.log);
    new Gauge({
      name: "kas_broken",
      help: "A collector with a bug.",
      registers: [metrics.registry],
      collect() {
        throw new Error("collector bug");
      },
    });
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(500);
    expect(await res.text()).toBe("internal error\n");
    const line = JSON.parse(
      logs
        .text()
        .split("\n")
        .find((l) => l.includes("request failed"))!,
    );
    expect(line).toMatchObject({ level: 50, front: "observability", method: "GET", route: "/metrics" });
    expect(line.err.message).toBe("collector bug");
    expect((await fetch(`${server.url}/liveness`)).status).toBe(200);
    const connect = await rawExchange(
      server.port,
      "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n",
    );
    expect(connect.statusLine).toBe("HTTP/1.1 405 Method Not Allowed");
  });

  test("a port in use: listening fails with EADDRINUSE", async () => {
    const { server } = await start();
    const metrics = createKasMetrics();
    await expect(
      serveObservability({
        listen: { host: "127.0.0.1", port: server.port },
        registry: metrics.registry,
        readiness: new ReadinessChecks(),
      }),
    ).rejects.toMatchObject({ code: "EADDRINUSE" });
  });
});
