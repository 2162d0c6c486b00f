// The per-replica agent summaries and their merge; summaries come back from a shared Redis, so
// the parser is property-tested against arbitrary input.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  type AgentConnection,
  type ConnectedAgent,
  type ConnectionRecord,
  mergeSummaries,
  parseSummary,
  summarize,
} from "../../../../modules/agent_tracker/kas/connected-agents.ts";
import { connectedAgentInfos } from "../../../../modules/agent_tracker/kas/gitlab-rpc.ts";

const tunnel = (agentId: string, projectId: string, connectedAt: string, connectionId = "1") => ({
  identity: { agentId, projectId, agentName: `agent-${agentId}` },
  stats: { connectedAt: new Date(connectedAt) },
  record: { connectionId } as ConnectionRecord,
});
const recordOf = (t: ReturnType<typeof tunnel>) => t.record;
const kubernetesVersionArb = fc.record({
  major: fc.string(),
  minor: fc.string(),
  gitVersion: fc.string(),
  platform: fc.string(),
});
// Pods of older agentk (and older kas replicas' summaries) have no commit id nor cluster version.
const podArb = fc.record(
  {
    namespace: fc.string(),
    name: fc.string(),
    version: fc.string(),
    commitId: fc.string(),
    kubernetesVersion: kubernetesVersionArb,
  },
  { requiredKeys: ["namespace", "name", "version"] },
);
const isoArb = fc
  .integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2030, 0, 1) })
  .map((ms) => new Date(ms).toISOString());
const connectionArb: fc.Arbitrary<AgentConnection> = fc.record(
  {
    connectionId: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String),
    connectedAt: isoArb,
    pod: podArb,
  },
  { requiredKeys: ["connectionId", "connectedAt"] },
);

const summaryArb: fc.Arbitrary<ConnectedAgent> = fc
  .record({
    agentId: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String),
    projectId: fc.integer({ min: 1, max: 1_000_000 }).map(String),
    agentName: fc.string(),
    tunnels: fc.integer({ min: 1, max: 1000 }),
    connectedSince: isoArb,
    // As a replica publishes them: one per tunnel at most, oldest first, each id once.
    connections: fc.uniqueArray(connectionArb, {
      minLength: 1,
      maxLength: 5,
      selector: (c) => c.connectionId,
    }),
  })
  .map((s) => {
    const connections = [...s.connections]
      .sort((a, b) => (a.connectedAt < b.connectedAt ? -1 : a.connectedAt > b.connectedAt ? 1 : 0))
      .slice(0, s.tunnels);
    // Ties in time are ordered by id.
    connections.sort(
      (a, b) =>
        (a.connectedAt < b.connectedAt ? -1 : a.connectedAt > b.connectedAt ? 1 : 0) ||
        (BigInt(a.connectionId) < BigInt(b.connectionId) ? -1 : 1),
    );
    const pods = connections.flatMap((c) => c.pod ?? []);
    return { ...s, connections, ...(pods.length > 0 && { pods: normalized(pods) }) };
  });

/** Pods as summaries hold them: sorted by namespace, name, version; each once. */
function normalized(pods: { namespace: string; name: string; version: string }[]) {
  const key = (p: (typeof pods)[number]) => `${p.namespace}\u0000${p.name}\u0000${p.version}`;
  return [...new Map(pods.map((p) => [key(p), p])).entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, p]) => p);
}

describe("summaries of one replica's tunnels", () => {
  test("one agent's tunnels: counted, with the earliest connection, each tunnel listed by its own id", () => {
    const pod = { namespace: "gitlab-agent", name: "agentk-b", version: "0.1.0" };
    const later = tunnel("42", "7", "2026-11-22T10:00:00Z", "9007199254740993");
    later.record.pod = pod;
    expect(summarize([later, tunnel("42", "7", "2026-11-22T09:00:00Z", "5")], recordOf)).toEqual({
      agentId: "42",
      projectId: "7",
      agentName: "agent-42",
      tunnels: 2,
      connectedSince: "2026-11-22T09:00:00.000Z",
      pods: [pod],
      connections: [
        { connectionId: "5", connectedAt: "2026-11-22T09:00:00.000Z" },
        { connectionId: "9007199254740993", connectedAt: "2026-11-22T10:00:00.000Z", pod },
      ],
    });
    expect(summarize([], recordOf)).toBeUndefined();
  });

  test("GitLab's ConnectedAgentInfo: one per connection, with its id, time and pod", () => {
    const pod = { namespace: "gitlab-agent", name: "agentk-a", version: "0.1.0" };
    const agent: ConnectedAgent = {
      agentId: "42",
      projectId: "7",
      agentName: "prod",
      tunnels: 2,
      connectedSince: "2026-11-22T09:00:00.000Z",
      pods: [pod],
      connections: [
        { connectionId: "11", connectedAt: "2026-11-22T09:00:00.000Z", pod },
        { connectionId: "12", connectedAt: "2026-11-22T10:00:00.000Z" },
      ],
    };
    expect(connectedAgentInfos(agent)).toEqual([
      {
        agentId: "42",
        projectId: "7",
        connectionId: "11",
        connectedAt: new Date("2026-11-22T09:00:00.000Z"),
        agentMeta: { version: "0.1.0", commitId: "", podNamespace: "gitlab-agent", podName: "agentk-a" },
      },
      {
        agentId: "42",
        projectId: "7",
        connectionId: "12",
        connectedAt: new Date("2026-11-22T10:00:00.000Z"),
        agentMeta: { version: "", commitId: "", podNamespace: "", podName: "" },
      },
    ]);
    // A summary from a replica older than connection ids: one entry per pod, connection id 0.
    const { connections: _, ...legacy } = agent;
    expect(connectedAgentInfos(legacy).map((i) => [i.connectionId, i.agentMeta?.podName])).toEqual([
      ["0", "agentk-a"],
    ]);
  });

  test("reported pods travel with the summary: sorted, without duplicates, merged across replicas", () => {
    const pod = (name: string) => ({ namespace: "gitlab-agent", name, version: "0.1.0" });
    const base = {
      agentId: "42",
      projectId: "7",
      agentName: "prod",
      tunnels: 1,
      connectedSince: "2026-11-22T09:00:00.000Z",
    };
    const here = { ...base, pods: [pod("b"), pod("a"), pod("b")] };
    expect(parseSummary(JSON.stringify(here))?.pods).toEqual([pod("a"), pod("b")]);
    const merged = mergeSummaries([parseSummary(JSON.stringify(here))!, { ...base, pods: [pod("c")] }, base]);
    expect(merged).toEqual([{ ...base, tunnels: 3, pods: [pod("a"), pod("b"), pod("c")] }]);
  });

  test("a summary survives the trip through Redis unchanged", () => {
    fc.assert(
      fc.property(summaryArb, (s) => {
        expect(parseSummary(JSON.stringify(s))).toEqual(s);
      }),
    );
  });

  test("anything else read back is dropped, never thrown", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc.jsonValue().map((v) => JSON.stringify(v)),
        ),
        (text) => {
          const parsed = parseSummary(text);
          if (parsed !== undefined) expect(parsed.tunnels).toBeGreaterThanOrEqual(1);
        },
      ),
    );
    const good = {
      agentId: "42",
      projectId: "7",
      agentName: "prod",
      tunnels: 1,
      connectedSince: "2026-11-22T09:00:00Z",
    };
    for (const bad of [
      { ...good, agentId: 42 },
      { ...good, agentId: "042" },
      { ...good, projectId: "" },
      { ...good, tunnels: 0 },
      { ...good, tunnels: 1.5 },
      { ...good, connectedSince: "yesterday" },
      { ...good, agentName: null },
      { ...good, pods: [] },
      { ...good, pods: "agentk-0" },
      { ...good, pods: [{ namespace: "ns", name: "p" }] },
      { ...good, pods: [{ namespace: "ns", name: "p".repeat(254), version: "1" }] },
      { ...good, pods: [{ namespace: "ns", name: "p", version: "1", commitId: "c".repeat(254) }] },
      { ...good, pods: [{ namespace: "ns", name: "p", version: "1", commitId: 5 }] },
      {
        ...good,
        pods: [{ namespace: "ns", name: "p", version: "1", kubernetesVersion: { major: "1", minor: "32" } }],
      },
      {
        ...good,
        pods: [
          {
            namespace: "ns",
            name: "p",
            version: "1",
            kubernetesVersion: { major: "1", minor: "32", gitVersion: "v".repeat(254), platform: "linux" },
          },
        ],
      },
      { ...good, connections: [] },
      { ...good, connections: "1" },
      { ...good, connections: [{ connectionId: "0", connectedAt: good.connectedSince }] },
      { ...good, connections: [{ connectionId: "9223372036854775808", connectedAt: good.connectedSince }] },
      { ...good, connections: [{ connectionId: 5, connectedAt: good.connectedSince }] },
      { ...good, connections: [{ connectionId: "5", connectedAt: "yesterday" }] },
      { ...good, connections: [{ connectionId: "5", connectedAt: good.connectedSince, pod: { name: "p" } }] },
      {
        ...good, // more connections than tunnels
        connections: [
          { connectionId: "5", connectedAt: good.connectedSince },
          { connectionId: "6", connectedAt: good.connectedSince },
        ],
      },
      {
        ...good,
        pods: Array.from({ length: 101 }, (_, i) => ({ namespace: "ns", name: `p${i}`, version: "1" })),
      },
    ]) {
      expect(parseSummary(JSON.stringify(bad))).toBeUndefined();
    }
    expect(parseSummary("null")).toBeUndefined();
    expect(parseSummary("{")).toBeUndefined();
  });
});

describe("merging the replicas' summaries", () => {
  test("one entry per agent: tunnels added up, the earliest connection kept, sorted by id; filters apply", () => {
    const at = (agentId: string, projectId: string, tunnels: number, connectedSince: string) => ({
      agentId,
      projectId,
      agentName: `agent-${agentId}`,
      tunnels,
      connectedSince,
    });
    const merged = mergeSummaries([
      at("9007199254740993", "8", 1, "2026-11-22T08:00:00.000Z"), // above 2^53: ordered as an integer
      at("42", "7", 2, "2026-11-22T10:00:00.000Z"),
      at("9007199254740992", "8", 1, "2026-11-22T08:00:00.000Z"),
      at("42", "7", 1, "2026-11-22T09:00:00.000Z"),
    ]);
    expect(merged.map((a) => [a.agentId, a.tunnels, a.connectedSince])).toEqual([
      ["42", 3, "2026-11-22T09:00:00.000Z"],
      ["9007199254740992", 1, "2026-11-22T08:00:00.000Z"],
      ["9007199254740993", 1, "2026-11-22T08:00:00.000Z"],
    ]);
    expect(mergeSummaries(merged, { projectId: "7" }).map((a) => a.agentId)).toEqual(["42"]);
    expect(mergeSummaries(merged, { agentId: "9007199254740993" })).toHaveLength(1);
  });

  test("connections of several replicas are put together: oldest first, each id once", () => {
    const base = { agentId: "42", projectId: "7", agentName: "prod", tunnels: 1 };
    const at = (connectionId: string, connectedAt: string) => ({
      ...base,
      connectedSince: connectedAt,
      connections: [{ connectionId, connectedAt }],
    });
    const [merged] = mergeSummaries([
      at("30", "2026-11-22T10:00:00.000Z"),
      at("20", "2026-11-22T09:00:00.000Z"),
      at("10", "2026-11-22T10:00:00.000Z"),
    ]);
    expect(merged?.tunnels).toBe(3);
    expect(merged?.connections?.map((c) => c.connectionId)).toEqual(["20", "10", "30"]);
  });

  test("merging is order-independent and conserves the tunnel count", () => {
    // An agent id stands for one agent: every replica reports the same project and name for it.
    const consistent = summaryArb.map((s) => {
      const n = Number(BigInt(s.agentId) % 5n) + 1;
      return { ...s, agentId: String(n), projectId: String((n % 3) + 1), agentName: `agent-${n}` };
    });
    fc.assert(
      fc.property(fc.array(consistent, { maxLength: 20 }), (list) => {
        const forward = mergeSummaries(list);
        expect(mergeSummaries([...list].reverse())).toEqual(forward);
        const total = (l: ConnectedAgent[]) => l.reduce((n, a) => n + a.tunnels, 0);
        expect(total(forward)).toBe(total(list));
      }),
    );
  });
});
