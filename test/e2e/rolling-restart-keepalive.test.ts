// Rolling restarts behind a TCP load balancer, with GitLab's API clients keeping their connections
// alive: haproxy in TCP mode for both the agents' listener and the API, so each client's
// keep-alive connection is a connection to one replica, which that replica closes when it drains.
// 8 undici clients (each its own keep-alive pool) call the agent's service through the API every
// 40 ms while each replica in turn gets SIGTERM, drains, exits and is replaced on the same ports.
// Not one request may fail: a client must never send a request on a connection kas is closing.
// E2E_ROLLING_RESTARTS sets how many rolling restarts (every replica once) one run makes (default
// 1: agentk answers GoAway on a tunnel younger than 30 s after a backoff that grows with each, so
// requests wait longer for the agent with every restart); scripts/rolling-restarts.sh runs the
// test ten times in a row.
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AGENT_ID, gitlabJwt } from "../kas/support/fixtures.ts";
import { until } from "../support/until.ts";
import { METRICS_BODY } from "./support/in-cluster-service.ts";
import { KasCluster, SERVICE, startLoad } from "./support/kas-cluster.ts";

const CLIENTS = 8;
const INTERVAL_MS = 40;
const ROLLING_RESTARTS = Number(process.env.E2E_ROLLING_RESTARTS ?? 1);
const servicePath = `/api/v1/agents/${AGENT_ID}/services/${SERVICE}/metrics`;

describe("rolling restarts behind a TCP load balancer, API clients keeping connections alive", () => {
  let cluster: KasCluster;
  const clients = Array.from({ length: CLIENTS }, () => new Agent());

  beforeAll(async () => {
    cluster = await KasCluster.start({
      apiBalancing: "tcp",
      // Short, to keep the test short: haproxy (checks every 200 ms, two failed to take a server
      // out) has taken the replica out well within the drain delay.
      kasEnv: { KAS_SHUTDOWN_GRACE_PERIOD: "10s", KAS_SHUTDOWN_DRAIN_DELAY: "1500ms" },
    });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await cluster?.close();
  });

  test(
    `${ROLLING_RESTARTS} rolling restarts in a row: zero failed requests`,
    async () => {
      const bothUp = async () => {
        const status = Object.values(await cluster.haproxy.serverStatus());
        return status.length === 4 && status.every((s) => s === "UP");
      };
      await until(bothUp, 15_000, "haproxy seeing every replica UP");
      const load = startLoad(
        CLIENTS,
        async (signal, client) => {
          const res = await request(`${cluster.haproxy.httpUrl}${servicePath}`, {
            dispatcher: clients[client]!,
            // GitLab's JWTs live a minute: a fresh one each time, as GitLab sends them.
            headers: { "gitlab-kas-api-request": await gitlabJwt(cluster.files.apiSecret) },
            signal,
          });
          const body = await res.body.text();
          return { ok: res.statusCode === 200 && body === METRICS_BODY, detail: `${res.statusCode} ${body}` };
        },
        15_000,
        INTERVAL_MS,
      );
      const sigterms: Array<{ at: number; replica: number; holder: boolean }> = [];
      try {
        await until(() => load.results.filter((r) => r.ok).length >= 4 * CLIENTS, 20_000, "requests served");
        for (let round = 0; round < ROLLING_RESTARTS; round++) {
          // The replica holding the agent's tunnel first; the tunnel moves to the other one, which is next.
          const holder = await cluster.holder();
          for (const i of [holder, 1 - holder]) {
            const old = cluster.kas[i]!;
            sigterms.push({ at: Date.now(), replica: i, holder: i === holder });
            old.child.kill("SIGTERM");
            expect(await old.exitCode(15_000)).toBe(0);
            await cluster.restart(i);
            await until(bothUp, 15_000, "haproxy seeing the replacement UP");
          }
        }
        const after = load.results.length + 5 * CLIENTS;
        await until(() => load.results.length >= after, 15_000, "requests after the restarts");
      } finally {
        await load.stop();
      }

      // Each failure, with when it started after the latest SIGTERM (the drain delay ends at 1.5 s).
      const failed = load.results
        .filter((r) => !r.ok)
        .map((r) => {
          const n = sigterms.findLastIndex((t) => t.at <= r.at);
          return `${r.detail} (client ${r.client}, after SIGTERM ${n} to ${JSON.stringify(sigterms[n])}: +${r.at - (sigterms[n]?.at ?? 0)} ms, took ${r.ms} ms)`;
        });
      console.log(
        `${ROLLING_RESTARTS} rolling restarts: ${load.results.length} requests, ${failed.length} failed\n${failed.join("\n")}`,
      );
      // haproxy logs each API connection as it ends: "SD" where kas closed it with a request on it.
      expect(failed, cluster.haproxy.output).toEqual([]);
      expect(load.results.length).toBeGreaterThan(ROLLING_RESTARTS * 100);
    },
    60_000 + ROLLING_RESTARTS * 60_000,
  );
});
