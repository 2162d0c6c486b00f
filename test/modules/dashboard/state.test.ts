// The page's state rules (modules/dashboard/web/state.ts), apart from the browser.
import fc from "fast-check";
import { expect, test } from "vitest";
import type { AgentViews, ViewEvent } from "../../../modules/cluster_views/views.ts";
import { applyEvent, podTotals, sortedAgents } from "../../../modules/dashboard/web/state.ts";

const nodes = (ready: number) => ({
  total: 9,
  ready,
  capacity: { cpuMillis: 1, memoryBytes: 1 },
  allocatable: { cpuMillis: 1, memoryBytes: 1 },
});
const change = (agentId: string, seq: number, ready: number): ViewEvent => ({
  type: "change",
  id: `${agentId}:${seq}`,
  agentId,
  seq,
  updatedAt: new Date(seq).toISOString(),
  views: { nodes: nodes(ready) },
});

test("whatever order changes arrive in, each agent shows its newest", () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ agent: fc.constantFrom("1", "2", "10"), seq: fc.nat(50) }), { maxLength: 40 }),
      (updates) => {
        let agents: ReadonlyMap<string, AgentViews> = new Map();
        for (const u of updates) agents = applyEvent(agents, change(u.agent, u.seq, u.seq % 10));
        for (const id of new Set(updates.map((u) => u.agent))) {
          const newest = Math.max(...updates.filter((u) => u.agent === id).map((u) => u.seq));
          expect(agents.get(id)?.seq).toBe(newest);
          expect(agents.get(id)?.views.nodes?.ready).toBe(newest % 10);
        }
        expect(sortedAgents(agents).map((a) => a.agentId)).toEqual(
          ["1", "2", "10"].filter((id) => agents.has(id)),
        );
      },
    ),
  );
});

test("a change replaces only the views it carries; presence and snapshots as told", () => {
  const snapshot: ViewEvent = {
    type: "snapshot",
    id: "1:3",
    agent: {
      agentId: "1",
      connected: true,
      seq: 3,
      updatedAt: "2026-01-01T00:00:00.000Z",
      views: {
        nodes: nodes(9),
        pods: {
          namespaces: {
            a: { phases: { Pending: 1, Running: 2, Succeeded: 3, Failed: 4, Unknown: 0 }, restarts: 5 },
            b: { phases: { Pending: 0, Running: 1, Succeeded: 0, Failed: 0, Unknown: 1 }, restarts: 1 },
          },
        },
      },
    },
  };
  let agents = applyEvent(new Map(), snapshot);
  agents = applyEvent(agents, change("1", 4, 8));
  expect(agents.get("1")?.views.nodes?.ready).toBe(8);
  expect(podTotals(agents.get("1")!)).toEqual({ total: 12, running: 3, pending: 1, failed: 4, restarts: 6 });
  agents = applyEvent(agents, { type: "disconnected", id: "1:4", agentId: "1" });
  expect(agents.get("1")?.connected).toBe(false);
  agents = applyEvent(agents, { type: "connected", id: "1:4", agentId: "1" });
  expect(agents.get("1")?.connected).toBe(true);
  // A new snapshot (the agent's new epoch, after a restart) wins even with a lower seq.
  agents = applyEvent(agents, { ...snapshot, agent: { ...snapshot.agent, seq: 1, views: {} } });
  expect(agents.get("1")).toMatchObject({ seq: 1, views: {} });
});
