// The history as kas records it from the views hub: two replicas hearing the same events write one
// history to a real redis-server (every replica shows the same); a recorder the hub dropped follows
// it again; agent statuses keep a disconnected agent's name.
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { AgentViews } from "../../../modules/cluster_views/views.ts";
import { AgentStatuses } from "../../../modules/dashboard/kas/agent-status.ts";
import { MemoryHistoryStore, RedisHistoryStore } from "../../../modules/dashboard/kas/history-store.ts";
import { recordHistory } from "../../../modules/dashboard/kas/recorder.ts";
import { MemoryViewsHub } from "../../support/memory-views-hub.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";

const quiet = { warn: () => {} };
const res = { cpuMillis: 0, memoryBytes: 0 };
const views = (agentId: string, seq: number, ready: number): AgentViews => ({
  agentId,
  connected: true,
  seq,
  updatedAt: new Date(Date.UTC(2026, 10, 27, 10, 0, seq)).toISOString(),
  views: {
    nodes: {
      total: 2,
      ready,
      capacity: res,
      allocatable: res,
      problems:
        ready < 2
          ? [
              {
                name: "node-2",
                ready: false,
                conditions: [{ type: "Ready", status: "False", reason: "X", message: "" }],
              },
            ]
          : [],
    },
  },
});

let redis: RedisServer;
let client: Redis;
beforeAll(async () => {
  redis = await RedisServer.start();
  client = new Redis({ ...redis.connection, lazyConnect: true });
  await client.connect();
});
afterAll(async () => {
  client?.disconnect();
  await redis?.close();
});

test("two replicas hearing the same events write one history to Redis", async () => {
  const hub = new MemoryViewsHub();
  const redisOf = { client, keyPrefix: "rec:" };
  const a = recordHistory(hub, new RedisHistoryStore(redisOf), quiet);
  const b = recordHistory(hub, new RedisHistoryStore(redisOf), quiet);
  try {
    hub.put(views("5", 1, 2));
    hub.put(views("5", 2, 1));
    hub.put(views("5", 3, 2));
    const store = new RedisHistoryStore(redisOf);
    await until(async () => (await store.history("5")).changes.length === 2, 5000, "both changes recorded");
    const { changes, samples } = await store.history("5");
    expect(changes.map((c) => [c.kind, c.object])).toEqual([
      ["node-ready", "Node node-2"],
      ["node-not-ready", "Node node-2"],
    ]);
    // One bucket's sample, written by both: one member.
    await until(
      async () => (await store.history("5")).samples.at(-1)?.nodesReady === 2,
      5000,
      "the last sample",
    );
    expect(samples.length).toBeLessThanOrEqual(2);
    expect(await client.zcard("rec:dashboard:changes:5")).toBe(2);
  } finally {
    a.close();
    b.close();
  }
});

test("dropped by the hub, the recorder follows it again", async () => {
  const hub = new MemoryViewsHub();
  const store = new MemoryHistoryStore();
  const warnings: string[] = [];
  const recorder = recordHistory(hub, store, { warn: (_: object, msg: string) => warnings.push(msg) });
  try {
    hub.put(views("6", 1, 2));
    hub.dropAll("too many events");
    await until(() => hub.subscribers === 1, 5000, "the recorder subscribed again");
    hub.put(views("6", 2, 1));
    await until(
      async () => (await store.history("6")).changes.length === 1,
      5000,
      "the change after the drop",
    );
    expect(warnings).toHaveLength(1);
  } finally {
    recorder.close();
  }
  expect(hub.subscribers).toBe(0);
});

test("agent statuses: an agent keeps its name once disconnected; a failing source leaves its part out", async () => {
  let connected = true;
  const statuses = new AgentStatuses({
    connectedAgents: async () =>
      connected
        ? [
            {
              agentId: "9",
              projectId: "3",
              agentName: "edge",
              tunnels: 2,
              connectedSince: "2026-11-27T09:00:00.000Z",
            },
          ]
        : [],
    configuration: async () => {
      throw new Error("Redis is down");
    },
  });
  expect(await statuses.of([])).toMatchObject([{ agentId: "9", name: "edge", tunnels: 2 }]);
  connected = false;
  const [status] = await statuses.of(["9"]);
  expect(status).toEqual({ agentId: "9", name: "edge", projectId: "3", tunnels: 0, agentk: [], gitops: [] });
});
