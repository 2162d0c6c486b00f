// internPod: agents that report the same namespace, version and cluster version share one copy of
// each; what differs stays each agent's own, and every pod reads back as it was reported.
import { expect, test } from "vitest";
import type { AgentPod } from "../../../../modules/agent_tracker/kas/connected-agents.ts";
import { internPod } from "../../../../modules/agent_tracker/kas/interned.ts";

// Built at run time, as the agents' messages decode: equal values, distinct strings.
const fresh = (s: string) => [...s].join("");
const pod = (name: string, minor: string, commitId?: string): AgentPod => ({
  namespace: fresh("gitlab-agent"),
  name: fresh(name),
  version: fresh("v17.0.0"),
  ...(commitId !== undefined && { commitId: fresh(commitId) }),
  kubernetesVersion: {
    major: "1",
    minor: fresh(minor),
    gitVersion: fresh(`v1.${minor}.0`),
    platform: "linux/amd64",
  },
});

test("equal reports share their parts; each pod reads back as reported, in the same order", () => {
  const a = internPod(pod("agentk-a", "31", "abc"));
  const b = internPod(pod("agentk-b", "31", "abc"));
  expect(a).toEqual(pod("agentk-a", "31", "abc"));
  expect(JSON.stringify(b)).toBe(JSON.stringify(pod("agentk-b", "31", "abc")));
  expect(b.kubernetesVersion).toBe(a.kubernetesVersion);
  expect(Object.isFrozen(a.kubernetesVersion)).toBe(true);
});

test("a different cluster version is its own; no commit id stays absent", () => {
  const a = internPod(pod("agentk-a", "31"));
  const c = internPod(pod("agentk-c", "32"));
  expect(c.kubernetesVersion).not.toBe(a.kubernetesVersion);
  expect(c.kubernetesVersion).toEqual({
    major: "1",
    minor: "32",
    gitVersion: "v1.32.0",
    platform: "linux/amd64",
  });
  expect("commitId" in c).toBe(false);
});
