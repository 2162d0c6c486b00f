// Zero-loss drain, as operators deploy it: two kas replicas (processes) sharing a real Redis,
// behind a real haproxy, one agentk (process) dialing haproxy. SIGTERM to the replica holding
// the tunnel: agentk dials the replacement (through haproxy, to the other replica) before the old
// tunnel drains, so the request in flight on the old tunnel completes and requests arriving at
// the surviving replica keep succeeding, before, during and after the drain.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type JsonLinesProcess, msg, spawnAgentk } from "../agentk/support/processes.ts";
import { AGENT_ID, gitlabJwt, TOKEN, writeFixtures } from "../kas/support/fixtures.ts";
import { type KasProcess, listenAddressOf, portsEnv, spawnKas } from "../kas/support/kas-process.ts";
import { Haproxy } from "../support/haproxy.ts";
import { RedisServer } from "../support/redis-server.ts";
import { until } from "../support/until.ts";
import { InClusterService, readBody } from "./support/in-cluster-service.ts";

/**
 * agentk answers GoAway with an immediate redial (make-before-break) only on a tunnel it trusts:
 * up at least 30 s (TunnelClient's `stableAfterMs`, not a flag of the agentk process) and
 * something received on it. A GoAway sooner is taken for a replica shedding load, and the redial
 * waits out a backoff delay. So the drain starts once the tunnel is this old.
 */
const STABLE_AFTER_MS = 30_000;
const SERVICE = "prometheus";
/** The same in-cluster service under a second name: a request for it cannot reuse a connection of the first. */
const FRESH_SERVICE = "grafana";

describe("drain of a kas replica behind haproxy: nothing is lost", () => {
  let dir: string;
  let files: Awaited<ReturnType<typeof writeFixtures>>;
  let redis: RedisServer;
  let kas: KasProcess[] = [];
  let haproxy: Haproxy;
  let agentk: JsonLinesProcess;
  let service: InClusterService;

  const api = async (replica: KasProcess, path: string) =>
    fetch(`${replica.addresses.api}${path}`, {
      headers: { "gitlab-kas-api-request": await gitlabJwt(files.apiSecret) },
    });
  const servicePath = (rest: string, name = SERVICE) => `/api/v1/agents/${AGENT_ID}/services/${name}${rest}`;
  const connectedLines = (replica: KasProcess) =>
    replica
      .out()
      .split("\n")
      .filter((l) => l.includes('"msg":"agent connected"'));

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "e2e-drain-"));
    files = await writeFixtures(dir);
    // The in-cluster service: /metrics answers at once; /slow streams a chunk every 100 ms until
    // the test finishes it, keeping a digest of every byte it sent.
    service = await InClusterService.start();

    redis = await RedisServer.start();
    const shared = {
      KAS_AGENT_STATIC_TOKENS_FILE: files.tokensFile,
      KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.apiSecretFile,
      KAS_REDIS_SERVER_ADDRESS: `127.0.0.1:${redis.port}`,
      KAS_REDIS_KEY_PREFIX: "e2e-drain",
      KAS_PRIVATE_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.privateSecretFile,
      KAS_SHUTDOWN_GRACE_PERIOD: "10s",
    };
    kas = await Promise.all([spawnKas({ ...portsEnv(), ...shared }), spawnKas({ ...portsEnv(), ...shared })]);
    haproxy = await Haproxy.start({
      backends: kas.map((k) => listenAddressOf(k.addresses.agent)),
    });
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, TOKEN);
    agentk = spawnAgentk(
      [
        "--kas-address",
        haproxy.url,
        "--token-file",
        tokenFile,
        "--service",
        `${SERVICE}=${service.url}`,
        "--service",
        `${FRESH_SERVICE}=${service.url}`,
      ],
      {
        AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0",
        POD_NAME: "agentk-drain",
        POD_NAMESPACE: "gitlab-agent",
      },
    );
    await agentk.waitFor(msg("connected to kas"));
  });

  afterAll(async () => {
    agentk?.kill();
    for (const k of kas) k.kill();
    await haproxy?.close();
    await redis?.close();
    service?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test("SIGTERM to the replica with the tunnel: the slow request completes, the tunnel moves to the other replica, requests keep succeeding", async () => {
    // 1. The agent is connected: which replica holds its tunnel?
    await until(() => kas.some((k) => connectedLines(k).length > 0), 10_000, "a replica with the tunnel");
    const holder = kas.findIndex((k) => connectedLines(k).length > 0);
    const [drained, survivor] = [kas[holder]!, kas[1 - holder]!];
    expect(connectedLines(survivor)).toEqual([]);
    // Both replicas serve the agent (the survivor forwards to the holder, found through Redis).
    for (const replica of kas) {
      await until(
        async () => {
          const res = await api(replica, servicePath("/metrics"));
          return res.status === 200 && (await res.text()) === "up 1\n";
        },
        10_000,
        "the service through each replica",
      );
    }

    // Requests at the survivor, back to back (its kept-alive connection to the agent never idles),
    // from now until the end of the test.
    const results: Array<{ at: number; ok: boolean; detail: string }> = [];
    let looping = true;
    const loop = (async () => {
      const deadline = Date.now() + 60_000;
      while (looping && Date.now() < deadline) {
        const at = Date.now();
        try {
          const res = await api(survivor, servicePath("/metrics"));
          const body = await res.text();
          results.push({ at, ok: res.status === 200 && body === "up 1\n", detail: `${res.status} ${body}` });
        } catch (err) {
          results.push({ at, ok: false, detail: String((err as Error).cause ?? err) });
        }
        await delay(0);
      }
    })();

    try {
      // The tunnel must be old enough for agentk to trust it (see STABLE_AFTER_MS).
      const [firstTunnel] = await agentk.waitFor(msg("connected to kas"));
      const connectedAt = Date.parse(String(firstTunnel!.time));
      expect(connectedAt).toBeGreaterThan(0);
      await until(
        () => Date.now() > connectedAt + STABLE_AFTER_MS + 1000,
        STABLE_AFTER_MS + 5000,
        "a stable tunnel",
      );

      // 2. A slow request at the replica holding the tunnel.
      const res = await api(drained, servicePath("/slow"));
      expect(res.status).toBe(200);
      const body = readBody(res);
      await until(() => body.bytes > 0, 5000, "the slow response's first bytes");
      /** The service's side of it: what it has sent so far, and how to finish it. */
      const slow = service.slow[0]!;

      // 3. SIGTERM to that replica.
      const drainStart = Date.now();
      drained.child.kill("SIGTERM");
      await until(() => drained.out().includes('"msg":"shutting down"'), 10_000, "the replica shutting down");
      // agentk's replacement tunnel lands on the survivor, through haproxy, while the old one drains.
      await agentk.waitFor(msg("connected to kas"), 2, 10_000);
      await until(() => connectedLines(survivor).length === 1, 10_000, "the tunnel at the survivor");
      expect(JSON.parse(connectedLines(survivor)[0]!)).toMatchObject({
        agentId: AGENT_ID,
        pod: { name: "agentk-drain", namespace: "gitlab-agent" },
      });
      // The old tunnel is still up, carrying the slow response (make-before-break).
      expect(drained.child.exitCode).toBeNull();
      expect(slow.done).toBe(false);
      // A new request at the survivor during the drain, for a service no earlier request used
      // (no kept-alive connection to reuse): dialed now, it goes over the new tunnel.
      const during = await api(survivor, servicePath("/metrics", FRESH_SERVICE));
      expect(during.status).toBe(200);
      expect(await during.text()).toBe("up 1\n");

      // The slow response streams on for 3 s in all, over the draining tunnel, then ends: every byte arrives.
      await until(() => slow.chunks >= 30, 10_000, "three seconds of the slow response");
      expect(drained.child.exitCode).toBeNull();
      slow.finish();
      await body.done;
      expect(body.bytes).toBe(slow.bytes);
      expect(body.received.digest("hex")).toBe(slow.sent.digest("hex"));

      // The drained replica exits cleanly, within its grace period.
      expect(await drained.exitCode(15_000)).toBe(0);
      const drainEnd = Date.now();

      // After the drain: the survivor lists the agent with its one tunnel, and serves it.
      await until(
        async () => {
          const listed = (await (await api(survivor, "/api/v1/agents")).json()) as {
            agents: Array<{ agentId: string; tunnels: number }>;
          };
          return listed.agents.length === 1 && listed.agents[0]!.tunnels === 1;
        },
        10_000,
        "the survivor listing the agent",
      );
      for (const name of [SERVICE, FRESH_SERVICE]) {
        const after = await api(survivor, servicePath("/metrics", name));
        expect(after.status).toBe(200);
        expect(await after.text()).toBe("up 1\n");
      }
      const afterCount = results.filter((r) => r.at >= drainEnd).length + 10;
      await until(
        () => results.filter((r) => r.at >= drainEnd).length >= afterCount,
        10_000,
        "requests after the drain",
      );

      looping = false;
      await loop;
      // The loop ran before, during and after the drain.
      const before = results.filter((r) => r.at < drainStart);
      const drainWindow = results.filter((r) => r.at >= drainStart && r.at < drainEnd);
      const afterwards = results.filter((r) => r.at >= drainEnd);
      expect(before.length).toBeGreaterThan(10);
      expect(drainWindow.length).toBeGreaterThan(10);
      expect(afterwards.length).toBeGreaterThanOrEqual(10);
      // None failed, before, during or after the drain. During it, the survivor's kept-alive
      // connection to the agent (a stream forwarded to the draining replica, onto the OLD tunnel)
      // is closed by agentk after its exchange under way, as the tunnel drains: the next request
      // opens a stream on the new tunnel instead of riding the old one until the grace period
      // cuts it (which failed a request in flight with "stream reset by peer").
      expect(before.filter((r) => !r.ok)).toEqual([]);
      expect(drainWindow.filter((r) => !r.ok)).toEqual([]);
      expect(afterwards.filter((r) => !r.ok)).toEqual([]);

      // agentk: no error, and no delayed reconnect: the new tunnel came before the old one ended.
      expect(agentk.lines.filter((l) => Number(l.level) >= 50)).toEqual([]);
      expect(agentk.lines.filter(msg("tunnel to kas ended; reconnecting after a delay"))).toEqual([]);
      await agentk.waitFor(msg("tunnel to kas closed"), 1, 5000);
      const order = agentk.lines.map((l) => l.msg);
      expect(order.lastIndexOf("connected to kas")).toBeLessThan(order.indexOf("tunnel to kas closed"));
    } finally {
      looping = false;
      await loop;
    }
  });
});
