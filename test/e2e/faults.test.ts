// Faults an operator meets, behind a real load balancer: two kas replicas sharing a real Redis
// behind haproxy (health checks on /readiness), one agentk through haproxy, clients sending
// requests for the agent's service back to back.
// - Redis stopped and started under load: readiness does not take the replicas out (haproxy keeps
//   them UP), the replica holding the tunnel serves every request, the other one fails fast with
//   503 while Redis is away and serves again once it is back.
// - kill -9 of the replica holding the tunnel: agentk is back through haproxy within about a
//   second, what was in flight over the dead replica fails fast, nothing hangs, and requests after
//   the reconnection succeed.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { REDIS_DOWN } from "../../cmd/kas/routing/index.ts";
import { AGENT_ID } from "../kas/support/fixtures.ts";
import type { KasProcess } from "../kas/support/kas-process.ts";
import { until, within } from "../support/until.ts";
import { METRICS_BODY, readBody } from "./support/in-cluster-service.ts";
import { FRESH_SERVICE, KasCluster, type LoadResult, SERVICE, startLoad } from "./support/kas-cluster.ts";

const servicePath = (rest: string) => `/api/v1/agents/${AGENT_ID}/services/${SERVICE}${rest}`;
/** A request that takes longer than this has hung: the load loops' per-request deadline. */
const REQUEST_DEADLINE_MS = 15_000;
/** What "fails fast" means here (a loaded machine included): far below any timeout on the way. */
const FAST_MS = 3000;
/** agentk's first reconnect waits 1 s +-20 % (its backoff); the issue's target is 2 s. */
const RECONNECT_TARGET_MS = 2000;
/** Slack for a loaded machine (two cores shared by several test runs); the figure is printed. */
const MARGIN_MS = 2000;

describe("faults behind haproxy: Redis outage, kill -9", () => {
  let cluster: KasCluster;

  beforeAll(async () => {
    cluster = await KasCluster.start();
  }, 120_000);
  afterAll(() => cluster?.close());

  /** Requests for the agent's service at `base` (a replica's API, or haproxy). */
  const requests = (base: () => string) => async (signal: AbortSignal) => {
    const res = await cluster.api(servicePath("/metrics"), { signal, base: base() });
    const body = await res.text();
    return { ok: res.status === 200 && body === METRICS_BODY, detail: `${res.status} ${body}` };
  };
  const holderAndOther = async (): Promise<[KasProcess, KasProcess]> => {
    const i = await cluster.holder();
    return [cluster.kas[i]!, cluster.kas[1 - i]!];
  };
  const allUp = async () => Object.values(await cluster.haproxy.serverStatus()).every((s) => s === "UP");
  /** A request for the agent's second service at replica `k`: how it ended, and how long it took. */
  const fresh = async (k: KasProcess) => {
    const start = Date.now();
    const path = `/api/v1/agents/${AGENT_ID}/services/${FRESH_SERVICE}/metrics`;
    const res = await cluster.api(path, {
      base: k.addresses.api!,
      signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
    });
    return { status: res.status, body: await res.text(), ms: Date.now() - start };
  };
  const served = async (base: string) => (await requests(() => base)(AbortSignal.timeout(5000))).ok;

  test("Redis stopped and started under load: every replica stays UP, local routes unaffected, remote ones fail fast and recover", async () => {
    await until(allUp, 15_000, "haproxy seeing every replica UP");
    const [holder, other] = await holderAndOther();
    await until(() => served(other.addresses.api!), 10_000, "the other replica forwarding to the holder");

    const local = startLoad(
      3,
      requests(() => holder.addresses.api!),
      REQUEST_DEADLINE_MS,
    );
    const remote = startLoad(
      3,
      requests(() => other.addresses.api!),
      REQUEST_DEADLINE_MS,
    );
    const balanced = startLoad(
      2,
      requests(() => cluster.haproxy.httpUrl),
      REQUEST_DEADLINE_MS,
    );
    const loads = [local, remote, balanced];
    const statuses: Array<Record<string, string>> = [];
    let stoppedAt = 0;
    let startedAt = 0;
    let recoveredAt = 0;
    try {
      await until(() => loads.every((l) => l.results.length >= 5), 10_000, "load before the outage");
      stoppedAt = Date.now();
      await cluster.redis.stop();
      // The other replica notices: a request that needs a new stream to the agent (a service no
      // kept-alive connection serves) fails fast there, naming Redis.
      await until(async () => (await fresh(other)).status === 503, 10_000, "the other replica failing fast");
      const refused = await fresh(other);
      expect(refused.status).toBe(503);
      expect(refused.body).toMatch(/redis/i);
      expect(refused.ms).toBeLessThan(FAST_MS);
      // The holder serves it: its own tunnel needs no Redis.
      expect(await fresh(holder)).toMatchObject({ status: 200, body: METRICS_BODY });
      // Both still ready (Redis down is a detail), the gauge says so, and haproxy keeps them in,
      // over ten of its checks while the load goes on.
      for (const k of [holder, other]) {
        const ready = await fetch(`${k.addresses.observability}/readiness`);
        expect(ready.status).toBe(200);
        expect(await ready.json()).toMatchObject({
          status: "ready",
          checks: expect.arrayContaining([{ name: "redis", ok: true, detail: REDIS_DOWN }]),
        });
        expect(await (await fetch(`${k.addresses.observability}/metrics`)).text()).toMatch(
          /^kas_redis_connected 0$/m,
        );
      }
      const sampling = Date.now();
      await until(
        async () => {
          statuses.push(await cluster.haproxy.serverStatus());
          return Date.now() - sampling > 2000 && statuses.length >= 10;
        },
        15_000,
        "haproxy's view sampled for two seconds of outage",
      );

      startedAt = Date.now();
      await cluster.redis.start();
      await until(async () => (await fresh(other)).status === 200, 15_000, "the other replica serving again");
      recoveredAt = Date.now();
      const after = remote.results.length + 10;
      await until(() => remote.results.length >= after, 10_000, "requests after the recovery");
    } finally {
      await Promise.all(loads.map((l) => l.stop()));
      if (!cluster.redis.running) await cluster.redis.start(); // for the next test, had this one failed
    }
    const outage = (r: LoadResult) => r.at >= stoppedAt && r.at < startedAt;
    const failed = (l: { results: LoadResult[] }) => l.results.filter((r) => !r.ok);
    console.log(
      `Redis outage: local ${local.results.length} requests (${failed(local).length} failed), remote ${
        remote.results.length
      } (${failed(remote).length} failed fast, slowest failure ${Math.max(0, ...failed(remote).map((r) => r.ms))} ms), through haproxy ${
        balanced.results.length
      } (${failed(balanced).length} failed); remote served again ${recoveredAt - startedAt} ms after Redis restarted`,
    );

    // haproxy kept every replica UP all along.
    expect(statuses.filter((s) => Object.values(s).some((v) => v !== "UP"))).toEqual([]);
    // The holder's own route never noticed.
    expect(failed(local)).toEqual([]);
    // The other replica's clients (kept-alive streams carry on while Redis is away): failures only
    // during the outage, each a fast 503 naming Redis.
    for (const r of failed(remote)) {
      expect(outage(r) || r.at < recoveredAt).toBe(true);
      expect(r.detail).toMatch(/^503 .*redis/i);
      expect(r.ms).toBeLessThan(FAST_MS);
    }
    expect(remote.results.filter((r) => r.at > recoveredAt).every((r) => r.ok)).toBe(true);
    // Through haproxy: served, or the other replica's 503; never "no server available". That 503
    // names Redis and comes fast, or, for a request waiting on the tunnel while Redis went away or
    // came back before the holder wrote its tunnels again, says the agent is not connected.
    for (const r of failed(balanced)) {
      expect(r.detail).toMatch(/^503 \{.*(redis|not connected)/i);
      if (/redis/i.test(r.detail)) expect(r.ms).toBeLessThan(FAST_MS);
    }
    // Redis is back: the registry repopulated at once, well within one liveness refresh (5 s).
    expect(recoveredAt - startedAt).toBeLessThan(5000 + MARGIN_MS);
  }, 90_000);

  test("kill -9 of the replica holding the tunnel: agentk back through haproxy, in-flight requests fail fast, none hangs", async () => {
    await until(allUp, 15_000, "haproxy seeing every replica UP");
    const [holder, survivor] = await holderAndOther();
    await until(() => served(survivor.addresses.api!), 10_000, "the survivor forwarding to the holder");
    // A long response in flight at the survivor, forwarded to the holder over the private API.
    const slowRes = await cluster.api(servicePath("/slow"), { base: survivor.addresses.api! });
    expect(slowRes.status).toBe(200);
    const slow = readBody(slowRes);
    await until(() => slow.bytes > 0, 10_000, "the slow response's first bytes");

    const load = startLoad(
      8,
      requests(() => cluster.haproxy.httpUrl),
      REQUEST_DEADLINE_MS,
    );
    let killedAt = 0;
    let reconnectMs = 0;
    let slowFailedMs = 0;
    try {
      await until(() => load.results.length >= 40, 10_000, "load before the kill");
      const connectionsBefore = cluster.connections(survivor);
      killedAt = Date.now();
      holder.child.kill("SIGKILL");
      // The response in flight over the dead replica ends with an error at once, not at a timeout.
      const outcome = await within(
        slow.done.then(
          () => "completed",
          (err: Error) => err,
        ),
        FAST_MS * 2,
        "the slow response to end",
      );
      slowFailedMs = Date.now() - killedAt;
      expect(outcome).toBeInstanceOf(Error);
      // agentk dials again, through haproxy, and lands on the survivor.
      await until(
        () => cluster.connections(survivor) > connectionsBefore,
        15_000,
        "agentk connected to the survivor",
      );
      reconnectMs = Date.now() - killedAt;
      const after = load.results.length + 40;
      await until(() => load.results.length >= after, 15_000, "requests after the reconnection");
    } finally {
      await load.stop();
    }
    const failed = load.results.filter((r) => !r.ok);
    console.log(
      `kill -9: agentk back through haproxy after ${reconnectMs} ms; the slow response failed ${slowFailedMs} ms after the kill; ${load.results.length} requests, ${failed.length} failed (${JSON.stringify(failed.map((r) => `${r.ms} ms: ${r.detail.slice(0, 80)}`))})`,
    );
    expect(reconnectMs).toBeLessThan(RECONNECT_TARGET_MS + MARGIN_MS);
    expect(slowFailedMs).toBeLessThan(FAST_MS);
    // Nothing hung: every request ended well before its deadline.
    expect(load.results.filter((r) => r.ms >= FAST_MS + RECONNECT_TARGET_MS + MARGIN_MS)).toEqual([]);
    // Failures only among requests in flight at the kill or sent before the dead replica could be
    // noticed (haproxy's in-flight requests to its API, connections it had open there); each fast.
    for (const r of failed) {
      expect(r.at).toBeLessThan(killedAt + FAST_MS);
      expect(r.ms).toBeLessThan(FAST_MS);
    }
    // Once agentk is back, everything is served.
    expect(load.results.filter((r) => r.at > killedAt + reconnectMs && !r.ok)).toEqual([]);
  }, 90_000);
});
