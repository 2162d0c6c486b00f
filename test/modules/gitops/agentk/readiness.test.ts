// When agentk counts an applied object as reconciled: kstatus's rules for the kinds GitLab's applier
// waits on (the Kubernetes test server drives Deployments end to end; the rest are checked here).
import { describe, expect, test } from "vitest";
import { readiness } from "../../../../modules/gitops/agentk/applier/readiness.ts";

const live = (
  kind: string,
  spec: Record<string, unknown>,
  status: Record<string, unknown>,
  generation = 2,
) => ({
  kind,
  metadata: { generation },
  spec,
  status: { observedGeneration: generation, ...status },
});

describe("readiness", () => {
  test.each([
    [
      "StatefulSet ready",
      "apps",
      live("StatefulSet", { replicas: 3 }, { readyReplicas: 3, updatedReplicas: 3 }),
      true,
    ],
    [
      "StatefulSet, one pod not ready",
      "apps",
      live("StatefulSet", { replicas: 3 }, { readyReplicas: 2, updatedReplicas: 3 }),
      false,
    ],
    [
      "StatefulSet, a revision rolling out",
      "apps",
      live(
        "StatefulSet",
        { replicas: 1 },
        { readyReplicas: 1, updatedReplicas: 1, currentRevision: "a", updateRevision: "b" },
      ),
      false,
    ],
    [
      "StatefulSet, OnDelete: ready pods are enough",
      "apps",
      live("StatefulSet", { replicas: 1, updateStrategy: { type: "OnDelete" } }, { readyReplicas: 1 }),
      true,
    ],
    [
      "StatefulSet, generation not observed",
      "apps",
      {
        ...live("StatefulSet", {}, { readyReplicas: 1, updatedReplicas: 1 }),
        status: { observedGeneration: 1 },
      },
      false,
    ],
    [
      "DaemonSet ready",
      "apps",
      live("DaemonSet", {}, { desiredNumberScheduled: 4, updatedNumberScheduled: 4, numberAvailable: 4 }),
      true,
    ],
    [
      "DaemonSet, pods not updated",
      "apps",
      live("DaemonSet", {}, { desiredNumberScheduled: 4, updatedNumberScheduled: 3, numberAvailable: 4 }),
      false,
    ],
    [
      "DaemonSet, pods not available",
      "apps",
      live("DaemonSet", {}, { desiredNumberScheduled: 4, updatedNumberScheduled: 4, numberAvailable: 2 }),
      false,
    ],
    [
      "Job complete",
      "batch",
      { kind: "Job", status: { conditions: [{ type: "Complete", status: "True" }] } },
      true,
    ],
    ["Job running", "batch", { kind: "Job", status: { active: 1 } }, false],
    ["a ConfigMap: nothing to wait for", "", { kind: "ConfigMap" }, true],
  ])("%s", (_, group, object, ready) => {
    expect(readiness(group, object as Parameters<typeof readiness>[1]).ready).toBe(ready);
  });

  test("a failed Job is not ready and failed (no point waiting for it)", () => {
    expect(
      readiness("batch", { kind: "Job", status: { conditions: [{ type: "Failed", status: "True" }] } }),
    ).toEqual({
      ready: false,
      failed: true,
      reason: "the job failed",
    });
  });
});
