// kas's ActionCable broadcasts against the real thing: Rails' actioncable (Debian's ruby-actioncable
// under puma) with its Redis subscription adapter and a channel doing
// `stream_from "cluster_agent:#{params[:agent_id]}"`, a real redis-server between, and a client
// speaking actioncable-v1-json over `ws`. The events come from an in-memory views hub here; the
// end-to-end test (Kubernetes test server -> agentk -> kas -> ActionCable) is in e2e-actioncable.test.ts.
import fc from "fast-check";
import { Redis } from "ioredis";
import { Counter, Registry } from "prom-client";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import {
  ActionCableBroadcaster,
  actionCableChannel,
  clusterAgentBroadcasting,
} from "../../../modules/cluster_views/kas/actioncable.ts";
import type { AgentViews, ViewEvent } from "../../../modules/cluster_views/views.ts";
import { ActionCableClient } from "../../support/actioncable-client.ts";
import { ActionCableServer } from "../../support/actioncable-server.ts";
import { MemoryViewsHub } from "../../support/memory-views-hub.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";

const PREFIX = "gitlab_test";
const quiet = { warn: () => {} };

function agent(agentId: string, seq: number, ready: number): AgentViews {
  const res = { cpuMillis: 4000, memoryBytes: 8 << 30 };
  return {
    agentId,
    connected: true,
    seq,
    updatedAt: new Date(0).toISOString(),
    views: { nodes: { total: 3, ready, capacity: res, allocatable: res } },
  };
}

function results() {
  const registry = new Registry();
  return new Counter({ name: "r", help: "r", labelNames: ["result"], registers: [registry] });
}
const count = async (c: Counter<"result">, result: string) =>
  (await c.get()).values.find((v) => v.labels.result === result)?.value ?? 0;

describe("channel names", () => {
  test("follow ActionCable's channel_with_prefix", () => {
    expect(actionCableChannel(clusterAgentBroadcasting("42"))).toBe("cluster_agent:42");
    expect(actionCableChannel(clusterAgentBroadcasting("42"), "gitlab_production")).toBe(
      "gitlab_production:cluster_agent:42",
    );
    fc.assert(
      fc.property(fc.string(), fc.stringMatching(/^[0-9]{1,19}$/), (prefix, id) => {
        expect(actionCableChannel(clusterAgentBroadcasting(id), prefix)).toBe(
          `${prefix}:cluster_agent:${id}`,
        );
      }),
    );
  });
});

describe("broadcasts into a real ActionCable", () => {
  let redis: RedisServer;
  let cable: ActionCableServer;
  let publisher: Redis;
  let hub: MemoryViewsHub;
  beforeEach(() => {
    hub = new MemoryViewsHub();
  });

  beforeAll(async () => {
    redis = await RedisServer.start();
    cable = await ActionCableServer.start({
      redisUrl: `redis://127.0.0.1:${redis.port}`,
      channelPrefix: PREFIX,
    });
    publisher = new Redis({ host: "127.0.0.1", port: redis.port });
  });
  afterAll(async () => {
    publisher?.disconnect();
    await cable?.close();
    await redis?.close();
  });

  test("a subscriber of an agent's channel gets that agent's events, and no other agent's", async () => {
    const counter = results();
    const broadcaster = new ActionCableBroadcaster({
      hub,
      publisher,
      channelPrefix: PREFIX,
      maxPending: 100,
      results: counter,
      log: quiet,
    });
    broadcaster.start();
    const client = await ActionCableClient.connect(cable.url);
    try {
      await client.subscribe("ClusterAgentChannel", { agent_id: "7" });
      hub.put(agent("8", 1, 1));
      hub.put(agent("7", 5, 2));
      hub.presence("7", false);
      const change = await client.message<ViewEvent>(
        (m) => m.type === "change",
        10_000,
        `agent 7's change on ActionCable (server log: ${cable.output})`,
      );
      expect(change).toEqual({
        type: "change",
        id: "7:5",
        agentId: "7",
        seq: 5,
        updatedAt: new Date(0).toISOString(),
        views: agent("7", 5, 2).views,
      });
      await client.message<ViewEvent>((m) => m.type === "disconnected", 10_000, "agent 7's disconnection");
      await until(async () => (await count(counter, "published")) === 3, 5000, "three broadcasts");
      // Agent 8's change was published (to its own channel) before 7's, so it would be here by now.
      expect(client.messages.map((m) => (m as ViewEvent & { agentId: string }).agentId)).toEqual(["7", "7"]);
    } finally {
      client.close();
      await broadcaster.close(1000);
    }
  });

  test("without the channel prefix ActionCable is configured with, nothing arrives", async () => {
    const counter = results();
    const wrong = new ActionCableBroadcaster({
      hub,
      publisher,
      maxPending: 100,
      results: counter,
      log: quiet,
    });
    const right = new ActionCableBroadcaster({
      hub,
      publisher,
      channelPrefix: PREFIX,
      maxPending: 100,
      results: results(),
      log: quiet,
    });
    const client = await ActionCableClient.connect(cable.url);
    try {
      await client.subscribe("ClusterAgentChannel", { agent_id: "9" });
      wrong.start();
      hub.put(agent("9", 1, 0));
      await until(async () => (await count(counter, "published")) === 1, 5000, "the unprefixed broadcast");
      right.start(); // its snapshot of agent 9, after the unprefixed change: the first to arrive
      const first = await client.message<ViewEvent>(() => true, 10_000, "the prefixed snapshot");
      expect(first.type).toBe("snapshot");
      expect(client.messages).toHaveLength(1);
    } finally {
      client.close();
      await wrong.close(1000);
      await right.close(1000);
    }
  });

  test("two replicas hearing the same events broadcast each once (claimed in Redis)", async () => {
    const claims = new Redis({ host: "127.0.0.1", port: redis.port });
    const counters = [results(), results()];
    const replicas = counters.map(
      (c) =>
        new ActionCableBroadcaster({
          hub,
          publisher,
          channelPrefix: PREFIX,
          maxPending: 100,
          claim: async (key) => (await claims.set(`claims:${key}`, "1", "PX", 30_000, "NX")) === "OK",
          results: c,
          log: quiet,
        }),
    );
    try {
      for (const r of replicas) r.start();
      for (let seq = 10; seq < 20; seq++) hub.put(agent("11", seq, seq % 3));
      const total = async (result: string) =>
        (await count(counters[0]!, result)) + (await count(counters[1]!, result));
      await until(
        async () => (await total("published")) + (await total("elsewhere")) === 20,
        5000,
        "20 claims",
      );
      expect(await total("published")).toBe(10);
    } finally {
      for (const r of replicas) await r.close(1000);
      claims.disconnect();
    }
  });
});

test("a stuck Redis makes broadcasts drop, counted, beyond max_pending", async () => {
  const hub = new MemoryViewsHub();
  const counter = results();
  const stuck = { publish: () => new Promise<never>(() => {}) };
  const broadcaster = new ActionCableBroadcaster({
    hub,
    publisher: stuck,
    maxPending: 5,
    results: counter,
    log: quiet,
  });
  broadcaster.start();
  for (let seq = 1; seq <= 12; seq++) hub.put(agent("1", seq, 1));
  expect(broadcaster.pending).toBe(5);
  expect(await count(counter, "dropped")).toBe(7);
  await broadcaster.close(10);
  expect(hub.subscribers).toBe(0);
});

test("dropped by the hub, the broadcaster follows again; stopped, it unsubscribes", async () => {
  const hub = new MemoryViewsHub();
  const counter = results();
  const published: string[] = [];
  const publisher = { publish: async (channel: string) => published.push(channel) };
  const broadcaster = new ActionCableBroadcaster({
    hub,
    publisher,
    maxPending: 10,
    results: counter,
    log: quiet,
    resubscribeMs: 10,
  });
  broadcaster.start();
  hub.dropAll("backlog");
  expect(hub.subscribers).toBe(0);
  await until(() => hub.subscribers === 1, 5000, "the broadcaster to follow again");
  hub.put(agent("3", 1, 1));
  await until(() => published.length === 1, 5000, "the broadcast after following again");
  expect(published).toEqual(["cluster_agent:3"]);
  broadcaster.stop();
  hub.dropAll("kas is shutting down");
  expect(hub.subscribers).toBe(0);
  await broadcaster.close(10);
  expect(hub.subscribers).toBe(0);
});
