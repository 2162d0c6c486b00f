// The views parser kas runs on what agents send and what Redis holds: never throws, refuses
// anything beyond the bounds or off the contract's shapes, and accepts what agentk computes.
import fc from "fast-check";
import { expect, test } from "vitest";
import { parseClusterViews, VIEW_LIMITS } from "../../../modules/cluster_views/limits.ts";

const count = fc.nat({ max: 1e9 });
const resources = fc.record({ cpuMillis: count, memoryBytes: count });
const phases = fc.record({ Pending: count, Running: count, Succeeded: count, Failed: count, Unknown: count });
const validViews = fc.record(
  {
    nodes: fc.record({ total: count, ready: count, capacity: resources, allocatable: resources }),
    pods: fc.record({
      namespaces: fc.dictionary(
        fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$/),
        fc.record({ phases, restarts: count }),
        {
          maxKeys: VIEW_LIMITS.namespaces,
        },
      ),
    }),
    workloads: fc.record({
      rollouts: fc.array(
        fc.record({
          kind: fc.constantFrom("Deployment", "StatefulSet", "DaemonSet"),
          namespace: fc.string({ maxLength: 20 }),
          name: fc.string({ maxLength: 20 }),
          desired: count,
          updated: count,
          ready: count,
          available: count,
          state: fc.constantFrom("complete", "progressing", "stuck"),
        }),
        { maxLength: VIEW_LIMITS.rollouts },
      ),
      total: count,
    }),
    warnings: fc.record({
      latest: fc.array(
        fc.record({
          namespace: fc.string({ maxLength: 20 }),
          object: fc.string({ maxLength: 20 }),
          reason: fc.string({ maxLength: 20 }),
          message: fc.string({ maxLength: 100 }),
          count,
          lastSeen: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        }),
        { maxLength: VIEW_LIMITS.warnings },
      ),
    }),
  },
  { requiredKeys: [] },
);

test("property: valid views round-trip", () => {
  fc.assert(
    fc.property(validViews, (v) => {
      expect(parseClusterViews(JSON.stringify(v))).toEqual({ views: v });
    }),
  );
});

test("property: any JSON text is parsed or refused with a reason, never thrown", () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.json(),
        fc.string(),
        validViews.map((v) => JSON.stringify({ ...v, extra: 1 })),
      ),
      (text) => {
        const r = parseClusterViews(text);
        if ("error" in r) expect(r.error.length).toBeGreaterThan(0);
        else expect(typeof r.views).toBe("object");
      },
    ),
  );
});

test("a namespace that is no DNS label is refused, not dropped (a record would lose __proto__ silently)", () => {
  const pods = (ns: string) =>
    JSON.stringify({
      pods: {
        namespaces: JSON.parse(
          `{${JSON.stringify(ns)}:{"phases":{"Pending":0,"Running":1,"Succeeded":0,"Failed":0,"Unknown":0},"restarts":0}}`,
        ),
      },
    });
  for (const ns of ["__proto__", "Shop", "-a", "a".repeat(64)]) {
    const r = parseClusterViews(pods(ns));
    expect(r, ns).toHaveProperty("error");
  }
  expect(parseClusterViews(pods("kube-system"))).toHaveProperty("views.pods.namespaces.kube-system");
});

test("beyond the bounds: refused", () => {
  const warning = { namespace: "a", object: "Pod/x", reason: "r", message: "m", count: 1, lastSeen: "x" };
  const tooMany = { warnings: { latest: Array.from({ length: VIEW_LIMITS.warnings + 1 }, () => warning) } };
  expect(parseClusterViews(JSON.stringify(tooMany))).toEqual({
    error: expect.stringMatching(/warnings\.latest/),
  });
  const long = { warnings: { latest: [{ ...warning, message: "x".repeat(VIEW_LIMITS.message + 1) }] } };
  expect("error" in parseClusterViews(JSON.stringify(long))).toBe(true);
  const nsMany = Object.fromEntries(
    Array.from({ length: VIEW_LIMITS.namespaces + 1 }, (_, i) => [
      `n${i}`,
      { phases: { Pending: 0, Running: 0, Succeeded: 0, Failed: 0, Unknown: 0 }, restarts: 0 },
    ]),
  );
  expect("error" in parseClusterViews(JSON.stringify({ pods: { namespaces: nsMany } }))).toBe(true);
  expect("error" in parseClusterViews(JSON.stringify({ nodes: { total: -1 } }))).toBe(true);
});
