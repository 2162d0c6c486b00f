// What changed between two views of an agent, and its counts at one time: the words the feed
// shows and the points the charts draw.
import { describe, expect, test } from "vitest";
import type { ClusterViews, Rollout } from "../../../modules/cluster_views/views.ts";
import { changesBetween, MAX_OBJECT, MAX_TEXT, sampleOf } from "../../../modules/dashboard/kas/timeline.ts";

const AT = "2026-11-27T10:00:00.000Z";
const res = { cpuMillis: 0, memoryBytes: 0 };
const rollout = (desired: number, state: Rollout["state"], extra: Partial<Rollout> = {}): Rollout => ({
  kind: "Deployment",
  namespace: "shop",
  name: "cart",
  desired,
  updated: 3,
  ready: 3,
  available: 3,
  state,
  ...extra,
});
const nodes = (notReady: string[]): ClusterViews["nodes"] => ({
  total: 3,
  ready: 3 - notReady.length,
  capacity: res,
  allocatable: res,
  problems: notReady.map((name) => ({
    name,
    ready: false,
    conditions: [{ type: "Ready", status: "False", reason: "KubeletNotReady", message: "runtime down" }],
  })),
});

describe("changesBetween", () => {
  test("a Deployment scaled and its rollout started, stuck (with why), then done", () => {
    const a: ClusterViews = { workloads: { rollouts: [rollout(3, "complete")], total: 1 } };
    const b: ClusterViews = { workloads: { rollouts: [rollout(5, "progressing")], total: 1 } };
    const c: ClusterViews = {
      workloads: {
        rollouts: [rollout(5, "stuck", { reason: "ProgressDeadlineExceeded", message: "timed out" })],
        total: 1,
      },
    };
    const d: ClusterViews = { workloads: { rollouts: [rollout(5, "complete")], total: 1 } };
    expect(changesBetween("1", a, b, AT).map((x) => [x.kind, x.object, x.text])).toEqual([
      ["scaled", "Deployment shop/cart", "scaled from 3 to 5 replicas"],
      ["rollout-started", "Deployment shop/cart", "rolling out: 3/5 updated, 3 ready"],
    ]);
    expect(changesBetween("1", b, c, AT)).toEqual([
      {
        agentId: "1",
        at: AT,
        kind: "rollout-stuck",
        object: "Deployment shop/cart",
        text: "rollout stuck at 3/5 updated: ProgressDeadlineExceeded (timed out)",
      },
    ]);
    expect(changesBetween("1", c, d, AT).map((x) => x.kind)).toEqual(["rolled-out"]);
    expect(changesBetween("1", d, d, AT)).toEqual([]);
  });

  test("a node NotReady and back, with its condition's reason", () => {
    const ok = { nodes: nodes([]) };
    const down = { nodes: nodes(["node-2"]) };
    expect(changesBetween("1", ok, down, AT).map((x) => [x.kind, x.object, x.text])).toEqual([
      ["node-not-ready", "Node node-2", "node not ready: KubeletNotReady, runtime down"],
    ]);
    expect(changesBetween("1", down, ok, AT).map((x) => [x.kind, x.object])).toEqual([
      ["node-ready", "Node node-2"],
    ]);
    // An agent older than the node list: the counts.
    const old = (ready: number): ClusterViews => ({
      nodes: { total: 3, ready, capacity: res, allocatable: res },
    });
    expect(changesBetween("1", old(3), old(2), AT).map((x) => x.text)).toEqual(["nodes ready: 3 → 2 of 3"]);
  });

  test("a pod's new trouble once (not each restart), a warning when new or seen again", () => {
    const pods = (reason: string, restarts: number): ClusterViews["pods"] => ({
      namespaces: {},
      problems: reason ? [{ namespace: "shop", name: "cart-0", phase: "Running", reason, restarts }] : [],
    });
    const warn = (count: number, lastSeen: string): ClusterViews["warnings"] => ({
      latest: [
        { namespace: "shop", object: "Pod/cart-0", reason: "BackOff", message: "Back-off", count, lastSeen },
      ],
    });
    const seen = "2026-11-27T09:59:00.000Z";
    const a: ClusterViews = { pods: pods("", 0), warnings: { latest: [] } };
    const b: ClusterViews = { pods: pods("CrashLoopBackOff", 1), warnings: warn(1, seen) };
    const c: ClusterViews = { pods: pods("CrashLoopBackOff", 2), warnings: warn(1, seen) };
    const d: ClusterViews = { pods: pods("CrashLoopBackOff", 2), warnings: warn(2, AT) };
    expect(changesBetween("1", a, b, AT).map((x) => [x.kind, x.object, x.text, x.at])).toEqual([
      ["pod-trouble", "Pod shop/cart-0", "CrashLoopBackOff, 1 restart", AT],
      ["warning", "Pod shop/cart-0", "BackOff: Back-off", seen],
    ]);
    expect(changesBetween("1", b, c, AT)).toEqual([]);
    expect(changesBetween("1", c, d, AT).map((x) => x.text)).toEqual(["BackOff: Back-off (×2)"]);
  });

  test("a view absent on either side tells nothing", () => {
    expect(changesBetween("1", {}, { nodes: nodes(["n"]) }, AT)).toEqual([]);
    expect(changesBetween("1", { nodes: nodes(["n"]) }, {}, AT)).toEqual([]);
  });
});

test("sampleOf: the counts the charts draw", () => {
  const views: ClusterViews = {
    nodes: nodes(["node-2"]),
    pods: {
      namespaces: {
        a: { phases: { Pending: 1, Running: 2, Succeeded: 0, Failed: 1, Unknown: 0 }, restarts: 3 },
        b: { phases: { Pending: 0, Running: 4, Succeeded: 1, Failed: 0, Unknown: 0 }, restarts: 2 },
      },
    },
    workloads: { rollouts: [rollout(5, "stuck"), rollout(3, "complete")], total: 2 },
    warnings: { latest: [] },
  };
  expect(sampleOf(views, 1000)).toEqual({
    t: 1000,
    nodesReady: 2,
    nodesTotal: 3,
    pods: { Pending: 1, Running: 6, Succeeded: 1, Failed: 1, Unknown: 0 },
    restarts: 5,
    warnings: 0,
    rollouts: 1,
  });
});

test("a change's object and text are cut to their bounds (the history's memory bound)", () => {
  const long = "x".repeat(5000);
  const w = (lastSeen: string): ClusterViews => ({
    warnings: {
      latest: [{ namespace: "n", object: `Pod/${long}`, reason: long, message: long, count: 1, lastSeen }],
    },
  });
  const [c] = changesBetween("1", w("2026-01-01T00:00:00Z"), w("2026-01-01T00:00:01Z"), AT);
  expect(c!.object).toHaveLength(MAX_OBJECT);
  expect(c!.text).toHaveLength(MAX_TEXT);
  expect(c!.text.endsWith("…")).toBe(true);
});
