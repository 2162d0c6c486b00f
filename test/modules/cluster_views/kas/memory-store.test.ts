// The memory store keeps each view as its JSON: what it gives back is what a spread of the updates
// would hold, in the same order, and each read is a copy of its own.
import { expect, test } from "vitest";
import { MemoryViewsStore } from "../../../../modules/cluster_views/kas/store.ts";
import type { ClusterViews } from "../../../../modules/cluster_views/views.ts";

const TIMES = { presenceTtlMs: 60_000, retainMs: 60_000 };
const nodes: ClusterViews = {
  nodes: {
    total: 2,
    ready: 1,
    capacity: { cpuMillis: 2000, memoryBytes: 2 ** 31 },
    allocatable: { cpuMillis: 1800, memoryBytes: 2 ** 30 },
  },
};
const pods = (running: number): ClusterViews => ({
  pods: {
    namespaces: {
      default: { phases: { Pending: 0, Running: running, Succeeded: 0, Failed: 0, Unknown: 0 }, restarts: 1 },
    },
  },
});
const warnings: ClusterViews = { warnings: { latest: [] } };

test("a change sets its views over the others, as a spread would (same order); a snapshot replaces them all", async () => {
  const store = new MemoryViewsStore(TIMES);
  await store.apply("1", "s", { seq: 1, snapshot: true, views: { ...pods(1), ...nodes } }, "t1");
  await store.apply("1", "s", { seq: 2, snapshot: false, views: { ...warnings, ...pods(2) } }, "t2");
  const spread = { ...pods(1), ...nodes, ...warnings, ...pods(2) };
  const got = await store.get("1");
  expect(got).toEqual({ agentId: "1", connected: true, seq: 2, updatedAt: "t2", views: spread });
  expect(JSON.stringify(got?.views)).toBe(JSON.stringify(spread));
  await store.apply("1", "s", { seq: 3, snapshot: true, views: warnings }, "t3");
  expect((await store.get("1"))?.views).toEqual(warnings);
  expect((await store.list()).map((a) => a.views)).toEqual([warnings]);
});

test("each read is a copy: changing what a reader got does not change the store", async () => {
  const store = new MemoryViewsStore(TIMES);
  await store.apply("1", "s", { seq: 1, snapshot: true, views: pods(3) }, "t1");
  const first = await store.get("1");
  first!.views.pods!.namespaces.default!.restarts = 99;
  expect((await store.get("1"))?.views).toEqual(pods(3));
});

test("a refresh keeps alive the agents of the streams still up, each only through the stream that owns it", async () => {
  let now = 0;
  const store = new MemoryViewsStore(TIMES, () => now);
  await store.apply("1", "s1", { seq: 1, snapshot: true, views: warnings }, "t1");
  await store.apply("2", "s2", { seq: 1, snapshot: true, views: warnings }, "t1");
  await store.apply("3", "s3", { seq: 1, snapshot: true, views: warnings }, "t1");
  now = 50_000;
  // Agent 2's views are refreshed by a stream that does not own them: they are not kept alive.
  await store.refresh([
    ["1", "s1"],
    ["2", "other"],
  ]);
  now = 70_000;
  expect((await store.list()).map((a) => a.agentId)).toEqual(["1"]);
  now = 110_000;
  expect(await store.get("1")).toBeUndefined();
});
