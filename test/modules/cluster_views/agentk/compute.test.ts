// The views from the informer cache's records: what each kind's record keeps, rollout states as
// `kubectl rollout status` reads them, the bounds whatever the cluster's size, and the seq clock's
// order across leader terms.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  nodesView,
  podsView,
  warningsView,
  workloadsView,
} from "../../../../modules/cluster_views/agentk/compute.ts";
import { SeqClock } from "../../../../modules/cluster_views/agentk/pusher.ts";
import {
  nodeRecord,
  podRecord,
  warningRecord,
  workloadRecord,
} from "../../../../modules/cluster_views/agentk/records.ts";
import { parseClusterViews, VIEW_LIMITS } from "../../../../modules/cluster_views/limits.ts";

describe("records", () => {
  test("a node: Ready, capacity and allocatable in millicores and bytes; unreadable quantities are 0", () => {
    const r = nodeRecord({
      metadata: { name: "n", resourceVersion: "5", labels: { big: "x".repeat(1000) } },
      status: {
        capacity: { cpu: "4", memory: "16Gi" },
        allocatable: { cpu: "3500m", memory: "1.5e3" },
        conditions: [{ type: "Ready", status: "True" }],
      },
    });
    expect(r).toEqual({
      metadata: { name: "n", resourceVersion: "5" },
      ready: true,
      capacity: { cpuMillis: 4000, memoryBytes: 16 * 2 ** 30 },
      allocatable: { cpuMillis: 3500, memoryBytes: 1500 },
      problems: [],
    });
    expect(
      nodeRecord({ metadata: { name: "n" }, status: { capacity: { cpu: "lots" } } }).capacity.cpuMillis,
    ).toBe(0);
  });

  test("a pod: its phase (Pending without one) and its containers' restarts summed", () => {
    expect(
      podRecord({
        metadata: { name: "p", namespace: "a" },
        status: {
          phase: "Running",
          containerStatuses: [{ restartCount: 2 }, { restartCount: 3 }],
          initContainerStatuses: [{ restartCount: 1 }],
        },
      }),
    ).toEqual({ metadata: { name: "p", namespace: "a" }, phase: "Running", restarts: 6, reason: "" });
    expect(podRecord({ metadata: { name: "p" } }).phase).toBe("Pending");
  });

  test("a pod's trouble: the waiting reason (CrashLoopBackOff) as kubectl shows it, its restarts", () => {
    const crashing = podRecord({
      metadata: { name: "cart-0", namespace: "shop" },
      status: {
        phase: "Running",
        containerStatuses: [
          { restartCount: 0, state: { running: {} } },
          { restartCount: 7, state: { waiting: { reason: "CrashLoopBackOff" } } },
        ],
      },
    });
    expect(crashing).toMatchObject({ restarts: 7, reason: "CrashLoopBackOff" });
    const view = podsView(
      [crashing, podRecord({ metadata: { name: "ok", namespace: "shop" }, status: { phase: "Running" } })],
      [],
    );
    expect(view.namespaces.shop!.restarts).toBe(7);
    expect(view.problems).toEqual([
      { namespace: "shop", name: "cart-0", phase: "Running", reason: "CrashLoopBackOff", restarts: 7 },
    ]);
  });

  test("a node's trouble: the conditions not as on a healthy node, not-ready nodes listed first", () => {
    const node = (name: string, conditions: object[]) =>
      nodeRecord({ metadata: { name }, status: { conditions } });
    const view = nodesView([
      node("a", [
        { type: "Ready", status: "True" },
        { type: "MemoryPressure", status: "True", reason: "KubeletHasInsufficientMemory", message: "low" },
      ]),
      node("b", [
        { type: "Ready", status: "False", reason: "KubeletNotReady", message: "runtime down" },
        { type: "DiskPressure", status: "False" },
      ]),
      node("c", [{ type: "Ready", status: "True" }]),
    ]);
    expect(view.problems).toEqual([
      {
        name: "b",
        ready: false,
        conditions: [{ type: "Ready", status: "False", reason: "KubeletNotReady", message: "runtime down" }],
      },
      {
        name: "a",
        ready: true,
        conditions: [
          { type: "MemoryPressure", status: "True", reason: "KubeletHasInsufficientMemory", message: "low" },
        ],
      },
    ]);
  });

  test("rollouts: complete, progressing (generation not observed, replicas not updated), stuck (deadline)", () => {
    const deployment = (status: object, generation = 1) => ({
      metadata: { name: "d", namespace: "a", generation },
      spec: { replicas: 3 },
      status,
    });
    const done = {
      observedGeneration: 1,
      replicas: 3,
      updatedReplicas: 3,
      readyReplicas: 3,
      availableReplicas: 3,
    };
    expect(workloadRecord("Deployment", deployment(done)).rollout.state).toBe("complete");
    expect(workloadRecord("Deployment", deployment(done, 2)).rollout.state).toBe("progressing");
    expect(workloadRecord("Deployment", deployment({ ...done, updatedReplicas: 1 })).rollout).toMatchObject({
      state: "progressing",
      desired: 3,
      updated: 1,
    });
    const stuck = {
      ...done,
      updatedReplicas: 1,
      conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" }],
    };
    expect(workloadRecord("Deployment", deployment(stuck)).rollout).toMatchObject({
      state: "stuck",
      reason: "ProgressDeadlineExceeded",
    });
    const sts = { metadata: { name: "s", generation: 1 }, spec: { replicas: 2 } };
    const stsDone = {
      observedGeneration: 1,
      updatedReplicas: 2,
      readyReplicas: 2,
      currentRevision: "r2",
      updateRevision: "r2",
    };
    expect(workloadRecord("StatefulSet", { ...sts, status: stsDone }).rollout.state).toBe("complete");
    expect(
      workloadRecord("StatefulSet", { ...sts, status: { ...stsDone, currentRevision: "r1" } }).rollout.state,
    ).toBe("progressing");
    const ds = (updated: number) => ({
      metadata: { name: "ds", generation: 1 },
      status: {
        observedGeneration: 1,
        desiredNumberScheduled: 3,
        updatedNumberScheduled: updated,
        numberReady: 3,
        numberAvailable: 3,
      },
    });
    expect(workloadRecord("DaemonSet", ds(3)).rollout).toMatchObject({ desired: 3, state: "complete" });
    expect(workloadRecord("DaemonSet", ds(2)).rollout.state).toBe("progressing");
  });

  test("a warning: its object, a cut message, the newest time it was seen", () => {
    const r = warningRecord({
      metadata: { name: "e", namespace: "a" },
      involvedObject: { kind: "Pod", name: "p" },
      reason: "BackOff",
      message: "m".repeat(5000),
      count: 7,
      lastTimestamp: new Date("2026-01-02T03:04:05Z"),
    });
    expect(r.warning).toMatchObject({
      object: "Pod/p",
      reason: "BackOff",
      count: 7,
      lastSeen: "2026-01-02T03:04:05.000Z",
    });
    expect(r.warning.message.length).toBe(VIEW_LIMITS.message);
  });
});

describe("views", () => {
  test("nodes: totals summed", () => {
    const n = (ready: boolean) =>
      nodeRecord({
        metadata: { name: "n" },
        status: { capacity: { cpu: "1" }, conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
      });
    expect(nodesView([n(true), n(false), n(true)])).toMatchObject({
      total: 3,
      ready: 2,
      capacity: { cpuMillis: 3000 },
    });
  });

  test("pods: the configured namespaces (even empty, others left out), or the busiest up to the limit", () => {
    const pods = Array.from({ length: 200 }, (_, i) =>
      podRecord({ metadata: { name: `p${i}`, namespace: `ns-${i % 70}` }, status: { phase: "Running" } }),
    );
    const busiest = podsView(pods, []);
    expect(Object.keys(busiest.namespaces)).toHaveLength(VIEW_LIMITS.namespaces);
    // ns-0 .. ns-59 have 3 pods, the rest 2: the cut keeps the busiest.
    expect(busiest.namespaces["ns-0"]?.phases.Running).toBe(3);
    expect(busiest.namespaces["ns-69"]).toBeUndefined();
    const configured = podsView(pods, ["ns-1", "empty"]);
    expect(Object.keys(configured.namespaces).sort()).toEqual(["empty", "ns-1"]);
    expect(configured.namespaces.empty?.phases.Running).toBe(0);
  });

  test("property: any number of objects makes views within the bounds kas accepts", () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 3000 }),
        fc.nat({ max: 300 }),
        fc.string({ maxLength: 2000 }),
        (nPods, nWorkloads, text) => {
          const pods = Array.from({ length: nPods }, (_, i) =>
            podRecord({
              metadata: { name: `p${i}`, namespace: `n${i % 97}` },
              // Every third pod crash-looping, with any reason text (cut to the bound).
              ...(i % 3 === 0 && {
                status: {
                  phase: "Running",
                  containerStatuses: [{ restartCount: i, state: { waiting: { reason: `${text}${i}` } } }],
                },
              }),
            }),
          );
          const nodes = Array.from({ length: nWorkloads }, (_, i) =>
            nodeRecord({
              metadata: { name: `node-${i}` },
              status: {
                conditions: [
                  { type: "Ready", status: i % 2 ? "True" : "False", reason: text, message: text },
                  { type: "DiskPressure", status: "True", reason: text, message: text },
                ],
              },
            }),
          );
          const workloads = Array.from({ length: nWorkloads }, (_, i) =>
            workloadRecord("Deployment", {
              metadata: { name: `d${i}`, namespace: "a" },
              spec: { replicas: 1 },
            }),
          );
          const warnings = Array.from({ length: nWorkloads }, (_, i) =>
            warningRecord({
              metadata: { name: `e${i}`, namespace: "a" },
              message: "x",
              lastTimestamp: new Date(i * 1000).toISOString(),
            }),
          );
          const views = {
            nodes: nodesView(nodes),
            pods: podsView(pods, []),
            workloads: workloadsView(workloads),
            warnings: warningsView(warnings),
          };
          expect(parseClusterViews(JSON.stringify(views))).toEqual({ views });
          expect(views.workloads.total).toBe(nWorkloads);
          if (nWorkloads > 0)
            expect(views.warnings.latest[0]?.lastSeen).toBe(new Date((nWorkloads - 1) * 1000).toISOString());
          // The pods in most trouble are listed first.
          if (nPods > 0) expect(views.pods.problems?.[0]?.restarts).toBe(3 * Math.floor((nPods - 1) / 3));
        },
      ),
      { numRuns: 30 },
    );
  });

  test("rollouts not complete come first", () => {
    const w = (name: string, ready: number) =>
      workloadRecord("Deployment", {
        metadata: { name, namespace: "a", generation: 1 },
        spec: { replicas: 1 },
        status: {
          observedGeneration: 1,
          replicas: 1,
          updatedReplicas: 1,
          readyReplicas: ready,
          availableReplicas: ready,
        },
      });
    expect(workloadsView([w("a", 1), w("b", 0)]).rollouts.map((r) => [r.name, r.state])).toEqual([
      ["b", "progressing"],
      ["a", "complete"],
    ]);
  });
});

test("property: the seq clock increases, and a later term starts above an earlier one", () => {
  fc.assert(
    fc.property(
      fc.array(fc.nat({ max: 5 }), { maxLength: 200 }),
      fc.integer({ min: 1, max: 10_000 }),
      (steps, gapMs) => {
        const old = new SeqClock();
        let now = 1_700_000_000_000;
        let last = 0;
        for (const step of steps) {
          now += step === 0 ? 0 : step; // several updates in one millisecond, or time moving on
          const s = old.next(now);
          expect(s).toBeGreaterThan(last);
          last = s;
        }
        // A new term (restart, another replica) starting later than the old term's last update.
        expect(new SeqClock().next(now + gapMs)).toBeGreaterThan(last);
      },
    ),
  );
});
