// Leader election with a Lease, against the Kubernetes test server through the real client.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoordinationV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { leaderOnly, Phase } from "../../../../modules/runtime/index.ts";
import { type LeaseApi, LeaseElector } from "../../../../modules/runtime/lease-elector.ts";
import { tokenFingerprint } from "../../../../tool/agent-token.ts";
import { TOKEN } from "../../../kas/support/fixtures.ts";
import { startInProcessKas } from "../../../kas/support/in-process.ts";
import { startInProcessAgentk } from "../../../support/agentk-in-process.ts";
import { type KubeApiServer, startKubeApiServer } from "../../../support/kube-apiserver.ts";
import { until, within } from "../../../support/until.ts";

let api: KubeApiServer;
let dir: string;
let coordination: CoordinationV1Api;
beforeAll(async () => {
  api = await startKubeApiServer();
  dir = await mkdtemp(join(tmpdir(), "lease-"));
  const kc = new KubeConfig();
  kc.loadFromFile(await api.writeKubeconfig(join(dir, "kubeconfig")));
  coordination = kc.makeApiClient(CoordinationV1Api);
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

const electors: LeaseElector[] = [];
afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.close()));
});

/** Short timings: a 1 s lease (its wire unit), renewed every 100 ms. */
function elector(identity: string, name: string, leaseApi: LeaseApi = coordination) {
  const e = new LeaseElector({
    api: leaseApi,
    namespace: "default",
    name,
    identity,
    leaseDurationMs: 1000,
    renewDeadlineMs: 600,
    retryPeriodMs: 100,
  });
  electors.push(e);
  return e;
}

const holderOf = async (name: string) =>
  (await coordination.readNamespacedLease({ name, namespace: "default" })).spec?.holderIdentity;

describe("lease elector", () => {
  test("one leader among three; it releases the lease on close and another takes over", async () => {
    const all = ["a", "b", "c"].map((id) => elector(id, "agent-one"));
    const overlaps: string[] = [];
    for (const e of all) {
      e.on("elected", () => {
        if (all.filter((x) => x.leading).length > 1) overlaps.push("two leaders");
      });
      e.start();
    }
    await until(() => all.some((e) => e.leading), 5000, "a leader");
    const first = all.find((e) => e.leading)!;
    const firstId = ["a", "b", "c"][all.indexOf(first)]!;
    expect(await holderOf("agent-one")).toBe(firstId);
    // After a renewal, still that one and only that one.
    const renewTime = async () =>
      String(
        (await coordination.readNamespacedLease({ name: "agent-one", namespace: "default" })).spec?.renewTime,
      );
    const before = await renewTime();
    await until(async () => (await renewTime()) !== before, 5000, "a renewal");
    expect(all.filter((e) => e.leading)).toEqual([first]);
    expect(await holderOf("agent-one")).toBe(firstId);

    await first.close();
    expect(first.leading).toBe(false);
    expect(await holderOf("agent-one")).not.toBe(firstId);
    await until(() => all.some((e) => e !== first && e.leading), 5000, "the next leader");
    expect(all.filter((e) => e.leading)).toHaveLength(1);
    expect(overlaps).toEqual([]);
  });

  test("a leader that cannot renew stops leading after the renew deadline; another takes over after the lease expires", async () => {
    let failing = false;
    const flaky: LeaseApi = {
      readNamespacedLease: (p) =>
        failing ? Promise.reject(new Error("API server unreachable")) : coordination.readNamespacedLease(p),
      createNamespacedLease: (p) => coordination.createNamespacedLease(p),
      replaceNamespacedLease: (p) =>
        failing
          ? Promise.reject(new Error("API server unreachable"))
          : coordination.replaceNamespacedLease(p),
    };
    const a = elector("a", "agent-two", flaky);
    a.start();
    await until(() => a.leading, 5000, "a leads");
    const b = elector("b", "agent-two");
    b.start();
    const events: string[] = [];
    a.on("lost", () => events.push("a lost"));
    b.on("elected", () => events.push("b elected"));
    failing = true;
    await until(() => b.leading, 10_000, "b leads");
    expect(a.leading).toBe(false);
    expect(events).toEqual(["a lost", "b elected"]); // never both
    expect(await holderOf("agent-two")).toBe("b");
  });

  test("a leader whose requests are never answered stops leading at the renew deadline, and its close does not wait on them", async () => {
    let hanging = false;
    const never = new Promise<never>(() => {});
    const silent: LeaseApi = {
      readNamespacedLease: (p) => (hanging ? never : coordination.readNamespacedLease(p)),
      createNamespacedLease: (p) => (hanging ? never : coordination.createNamespacedLease(p)),
      replaceNamespacedLease: (p) => (hanging ? never : coordination.replaceNamespacedLease(p)),
    };
    const a = elector("a", "agent-four", silent);
    a.start();
    await until(() => a.leading, 5000, "a leads");
    const lost = new Promise<void>((resolve) => a.once("lost", resolve));
    hanging = true;
    await within(lost, 5000, "a to stop leading");
    expect(a.leading).toBe(false);
    // An attempt is under way (unanswered) as it closes: close settles all the same.
    await within(a.close(), 5000, "close with an unanswered request");
  });

  test("a conflicting write (409) is a lost race, not an error", async () => {
    const name = "agent-three";
    const a = elector("a", name);
    a.start();
    await until(() => a.leading, 5000, "a leads");
    const lease = await coordination.readNamespacedLease({ name, namespace: "default" });
    // A stale resourceVersion: the test server refuses the write with 409, as the real one does.
    const stale = { ...lease, metadata: { ...lease.metadata, resourceVersion: "1" } };
    const err = await coordination
      .replaceNamespacedLease({ name, namespace: "default", body: stale })
      .catch((e: unknown) => e);
    expect((err as { code?: number }).code).toBe(409);
  });
});

describe("agentk with a leader-only module", () => {
  test("runs it on the replica holding the agent's Lease, and releases the Lease when it stops", async () => {
    const kas = await startInProcessKas();
    const runs: string[] = [];
    const once = leaderOnly({
      name: "once_per_agent",
      phase: Phase.capability,
      create: () => ({
        name: "once_per_agent",
        start: () => void runs.push("start"),
        close: async () => void runs.push("close"),
      }),
    });
    const agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      kubernetes: await api.writeKubeconfig(join(dir, "agentk-kubeconfig")),
      pod: { name: "agentk-a", namespace: "default" },
      modules: [once],
    });
    const lease = `agentk-${tokenFingerprint(TOKEN)}`;
    try {
      await until(() => runs.includes("start"), 10_000, "the leader-only module started");
      expect(await holderOf(lease)).toBe("agentk-a");
    } finally {
      await agent.stop();
      await kas.close();
    }
    expect(runs).toEqual(["start", "close"]);
    expect(await holderOf(lease)).toBe("");
  });
});
