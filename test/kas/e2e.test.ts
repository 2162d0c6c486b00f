import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startInProcessAgentk } from "../support/agentk-in-process.ts";
import { rawExchange } from "../support/raw-http.ts";
import { RedisServer } from "../support/redis-server.ts";
import { until } from "../support/until.ts";
import { AGENT_ID, gitlabJwt, TOKEN, writeFixtures } from "./support/fixtures.ts";
import { type KasProcess, listenAddressOf, portsEnv, spawnKas } from "./support/kas-process.ts";

// kas as a process (cmd/kas/main.ts), agentk in this process (its real modules).
describe("kas process, end to end", () => {
  let dir: string;
  let files: Awaited<ReturnType<typeof writeFixtures>>;
  const cleanup: Array<() => unknown> = [];
  const held: ServerResponse[] = [];
  // A stand-in in-cluster service: /metrics answers at once, /stream writes "first" and waits for the test.
  const service = createServer((req, res) => {
    if (req.url === "/stream") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("first\n");
      held.push(res);
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("up 1\n");
  });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kas-e2e-"));
    files = await writeFixtures(dir);
  });
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const baseEnv = () => ({
    KAS_AGENT_STATIC_TOKENS_FILE: files.tokensFile,
    KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.apiSecretFile,
    KAS_AGENT_DIAL_TIMEOUT: "2s",
  });
  const start = async (env: Record<string, string> = {}): Promise<KasProcess> => {
    const kas = await spawnKas({ ...portsEnv(), ...baseEnv(), ...env });
    cleanup.push(() => kas.kill());
    return kas;
  };
  const agent = async (
    kas: KasProcess,
    token = TOKEN,
    backoff?: { initialMs: number; maxMs: number; factor: number },
  ) => {
    const a = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token,
      services: { prometheus: service },
      ...(backoff && { backoff }),
    });
    cleanup.push(() => a.stop());
    return a;
  };
  const api = async (kas: KasProcess, path: string) =>
    fetch(`${kas.addresses.api}${path}`, {
      headers: { "gitlab-kas-api-request": await gitlabJwt(files.apiSecret) },
    });

  it("an agent connects; GitLab's request reaches its service through kas; metrics show it", async () => {
    const kas = await start();
    await (await agent(kas)).agent.client.ready(10_000);
    const res = await api(kas, `/api/v1/agents/${AGENT_ID}/services/prometheus/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("up 1\n");
    const listed = (await (await api(kas, "/api/v1/agents")).json()) as { agents: unknown[] };
    expect(listed.agents).toMatchObject([{ agentId: "42", projectId: "7", tunnels: 1 }]);
    const metrics = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
    expect(metrics).toMatch(/^kas_connected_agents 1$/m);
    expect(metrics).toMatch(/^kas_tunnels 1$/m);
    expect(metrics).toMatch(
      /^kas_request_duration_seconds_count\{route="\/api\/v1\/agents\/\{agent_id\}\/services\/\{name\}\/\*",status="200"\} 1$/m,
    );
    expect(metrics).toMatch(/^kas_agent_authentications_total\{result="ok"\} 1$/m);
  });

  it("a wrong token: 401, and the agent backs off instead of hammering kas", async () => {
    const kas = await start();
    const a = await agent(kas, "not-a-token", { initialMs: 100, maxMs: 1000, factor: 2 });
    const delays: number[] = [];
    a.agent.client.on("retry", ({ delayMs }) => delays.push(delayMs));
    await until(() => delays.length >= 4, 10_000, "four refused handshakes");
    // Each wait is longer than the one before (100, 200, 400, 800 ms, each ±20 %): a backoff, not a loop.
    for (let i = 1; i < 4; i++) expect(delays[i]!).toBeGreaterThan(delays[i - 1]!);
    expect(delays[3]!).toBeGreaterThanOrEqual(640);
    expect(new Set(a.rejected)).toEqual(new Set([401]));
    await a.agent.client.close(0); // no more attempts: kas's count can be compared
    const metrics = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
    const counted = Number(
      /^kas_agent_authentications_total\{result="unauthenticated"\} (\d+)$/m.exec(metrics)?.[1],
    );
    expect(counted).toBeGreaterThanOrEqual(a.rejected.length);
    expect(counted).toBeLessThanOrEqual(a.rejected.length + 1); // one may have been cut by stop()
  });

  it("SIGTERM during a streaming response: the API answers Connection: close during the drain delay, the response completes, then kas exits 0", async () => {
    const kas = await start({ KAS_SHUTDOWN_GRACE_PERIOD: "10s", KAS_SHUTDOWN_DRAIN_DELAY: "2s" });
    await (await agent(kas)).agent.client.ready(10_000);
    const res = await api(kas, `/api/v1/agents/${AGENT_ID}/services/prometheus/stream`);
    const reader = res.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("first\n");
    kas.child.kill("SIGTERM");
    await until(() => kas.out().includes('"msg":"shutting down"'), 10_000, "kas shutting down");
    // Still served while load balancers take kas out, but a kept-alive connection ends after it:
    // closing one between two requests could lose the second.
    const { port } = new URL(kas.addresses.api!);
    const request = `GET /api/v1/agents?project_id=7 HTTP/1.1\r\nhost: kas\r\ngitlab-kas-api-request: ${await gitlabJwt(files.apiSecret)}\r\n\r\n`;
    const draining = await rawExchange(Number(port), request);
    expect(draining.status, draining.body).toBe(200);
    expect(draining.headers.connection).toBe("close");
    // After the drain delay kas stops accepting: new connections are refused while the stream carries on.
    await until(
      () =>
        fetch(`${kas.addresses.api}/api/v1/agents`).then(
          () => false,
          () => true,
        ),
      5000,
      "API closed to new connections",
    );
    held.shift()!.end("last\n");
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += Buffer.from(r.value).toString();
    expect(rest).toBe("last\n");
    expect(await kas.exitCode()).toBe(0);
  });

  it("kill -9 on kas: the agent reconnects once kas is back on the same address", async () => {
    const first = await start();
    const a = (await agent(first)).agent;
    const tunnel = await a.client.ready(10_000);
    first.child.kill("SIGKILL");
    await once(tunnel, "close");
    // Listening before kas starts: the agent may dial it before its "listening" line is read here.
    const reconnected = once(a.client, "connected", { signal: AbortSignal.timeout(30_000) });
    // The same agent address (the agent's URL); the other listeners wherever the OS puts them.
    const second = await start({ KAS_AGENT_LISTEN_ADDRESS: listenAddressOf(first.addresses.agent) });
    const [again] = await reconnected;
    expect(again).not.toBe(tunnel);
    const res = await api(second, `/api/v1/agents/${AGENT_ID}/services/prometheus/metrics`);
    expect(res.status).toBe(200);
  });

  describe("two replicas sharing Redis", () => {
    let redis: RedisServer;
    beforeAll(async () => {
      redis = await RedisServer.start();
    });
    afterAll(async () => {
      await redis.close();
    });

    it("a request at the replica without the tunnel is forwarded; either lists the agent; SIGTERM withdraws the replica from Redis", async () => {
      const shared = {
        KAS_REDIS_SERVER_ADDRESS: `127.0.0.1:${redis.port}`,
        KAS_REDIS_KEY_PREFIX: "e2e",
        KAS_PRIVATE_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.privateSecretFile,
        // B keeps its forwarded stream alive for reuse; A's drain need not wait out B's idle timeout.
        KAS_SHUTDOWN_GRACE_PERIOD: "1s",
      };
      const [a, b] = await Promise.all([start(shared), start(shared)]);
      expect(a.addresses.privateApi).toMatch(/^ws:\/\/127\.0\.0\.1:\d+/);
      await (await agent(a)).agent.client.ready(10_000);
      const res = await api(b, `/api/v1/agents/${AGENT_ID}/services/prometheus/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("up 1\n");
      // GitLab may ask any replica (they sit behind one load balancer): each lists the agent.
      const listed = async (kas: KasProcess) =>
        ((await (await api(kas, "/api/v1/agents?project_id=7")).json()) as { agents: unknown[] }).agents;
      await until(async () => (await listed(b)).length > 0, 5000, "A's summary in Redis");
      for (const kas of [a, b]) {
        expect(await listed(kas)).toEqual([
          expect.objectContaining({ agentId: AGENT_ID, projectId: "7", agentName: "prod", tunnels: 1 }),
        ]);
      }
      // The tunnel's connection id travels with A's summary: B lists the one A made.
      const connectionIds = async (kas: KasProcess) =>
        ((await listed(kas)) as { connections?: { connectionId: string }[] }[]).flatMap(
          (x) => x.connections?.map((c) => c.connectionId) ?? [],
        );
      const [atA] = await connectionIds(a);
      expect(atA).toMatch(/^[1-9]\d*$/);
      expect(await connectionIds(b)).toEqual([atA]);
      for (const kas of [a, b]) {
        const ready = await fetch(`${kas.addresses.observability}/readiness`);
        expect(ready.status).toBe(200);
        expect(JSON.stringify(await ready.json())).toContain('"name":"redis","ok":true}');
      }

      const client = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true });
      await client.connect();
      cleanup.push(() => client.disconnect());
      const key = `e2e:router:agent:${AGENT_ID}`;
      expect(Object.keys(await client.hgetall(key))).toHaveLength(1);
      a.child.kill("SIGTERM");
      expect(await a.exitCode()).toBe(0);
      expect(await client.hgetall(key)).toEqual({});
      expect(await listed(b)).toEqual([]);
    });
  });
});
