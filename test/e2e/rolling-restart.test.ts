// A rolling restart as operators do it, behind a real load balancer: two kas replicas sharing a
// real Redis behind haproxy (agentk through its TCP frontend, GitLab's requests through its HTTP
// frontend, both health-checked on /readiness), 8 clients sending requests for the agent's
// service back to back through haproxy. Each replica in turn gets SIGTERM, drains, exits, and a
// new process takes its ports. Not one request may fail, and slow responses in flight over the
// draining replica's tunnel complete, every byte.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AGENT_ID } from "../kas/support/fixtures.ts";
import { until } from "../support/until.ts";
import { type BodyReader, METRICS_BODY, readBody } from "./support/in-cluster-service.ts";
import { KasCluster, SERVICE, startLoad } from "./support/kas-cluster.ts";

const CLIENTS = 8;
const servicePath = (rest: string) => `/api/v1/agents/${AGENT_ID}/services/${SERVICE}${rest}`;

describe("rolling restart of every kas replica behind haproxy, under load", () => {
  let cluster: KasCluster;

  beforeAll(async () => {
    // A short grace period keeps the test short; the slow responses end well within it.
    cluster = await KasCluster.start({ kasEnv: { KAS_SHUTDOWN_GRACE_PERIOD: "4s" } });
  }, 120_000);
  afterAll(() => cluster?.close());

  test("SIGTERM to each replica in turn, replaced on the same ports: zero failed requests, slow responses complete", async () => {
    // Both replicas serve the agent through haproxy (one forwards to the other, found through Redis).
    await until(
      async () => {
        const status = await cluster.haproxy.serverStatus();
        return Object.values(status).length === 4 && Object.values(status).every((s) => s === "UP");
      },
      15_000,
      "haproxy seeing every replica UP",
    );
    for (let i = 0; i < 4; i++) {
      const res = await cluster.api(servicePath("/metrics"));
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(METRICS_BODY);
    }

    const load = startLoad(CLIENTS, async (signal) => {
      const res = await cluster.api(servicePath("/metrics"), { signal });
      const body = await res.text();
      return { ok: res.status === 200 && body === METRICS_BODY, detail: `${res.status} ${body}` };
    });
    const rounds: Array<{
      replica: number;
      sigterm: number;
      exited: number;
      up: number;
      slowBytes: number[];
    }> = [];
    try {
      // The replica holding the agent's tunnel first; the tunnel moves to the other one, which is next.
      const holder = await cluster.holder();
      for (const i of [holder, 1 - holder]) {
        const old = cluster.kas[i]!;
        // Two slow responses in flight, through haproxy, over the agent's tunnel on this replica.
        const first = cluster.service.slow.length;
        // One after the other, so the service's n-th slow response is the n-th body here.
        const bodies: BodyReader[] = [];
        for (let n = 0; n < 2; n++) {
          const res = await cluster.api(servicePath("/slow"));
          expect(res.status).toBe(200);
          bodies.push(readBody(res));
          await until(() => bodies[n]!.bytes > 0, 10_000, "a slow response's first bytes");
        }
        const slows = cluster.service.slow.slice(first);
        expect(slows).toHaveLength(2);

        const sigterm = Date.now();
        old.child.kill("SIGTERM");
        await until(() => old.out().includes('"msg":"shutting down"'), 10_000, "the replica shutting down");
        // They stream on for 1.5 s of the drain, then end: every byte arrives.
        const chunks = slows.map((s) => s.chunks);
        await until(
          () => slows.every((s, n) => s.chunks >= chunks[n]! + 15),
          10_000,
          "the slow responses streaming during the drain",
        );
        for (const s of slows) s.finish();
        await Promise.all(bodies.map((b) => b.done));
        bodies.forEach((b, n) => {
          expect(b.bytes).toBe(slows[n]!.bytes);
          expect(b.received.digest("hex")).toBe(slows[n]!.sent.digest("hex"));
        });

        expect(await old.exitCode(15_000)).toBe(0);
        const exited = Date.now();
        // The replacement, on the same ports; haproxy's checks take it back in.
        await cluster.restart(i);
        await until(
          async () => {
            const status = await cluster.haproxy.serverStatus();
            return status[`kas/kas${i}`] === "UP" && status[`api/api${i}`] === "UP";
          },
          15_000,
          "haproxy seeing the replacement UP",
        );
        rounds.push({ replica: i, sigterm, exited, up: Date.now(), slowBytes: slows.map((s) => s.bytes) });
      }
      // Requests keep being served after the last restart.
      const after = load.results.length + 5 * CLIENTS;
      await until(() => load.results.length >= after, 15_000, "requests after the restarts");
    } finally {
      await load.stop();
    }

    const failed = load.results.filter((r) => !r.ok);
    const slowest = Math.max(...load.results.map((r) => r.ms));
    console.log(
      `rolling restart: ${load.results.length} requests, ${failed.length} failed, slowest ${slowest} ms; rounds ${JSON.stringify(rounds)}`,
    );
    expect(failed, cluster.haproxy.output).toEqual([]);
    expect(load.results.length).toBeGreaterThan(200);
    // The agent ended up connected to a replacement (every original replica is gone).
    expect(cluster.kas.some((k) => cluster.connections(k) > 0)).toBe(true);
  }, 120_000);
});
