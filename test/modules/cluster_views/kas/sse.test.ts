// kas's views API on one replica (no agent: updates go to the hub as PushViews would hand them):
// current views, SSE with a snapshot then changes, Last-Event-ID resume, heartbeats, 1,000
// concurrent subscribers, a subscriber that stops reading cut at the bound (others unaffected),
// the subscriber limit, and GitLab's JWT required.
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Hub } from "../../../../modules/cluster_views/kas/hub.ts";
import type { ClusterViews } from "../../../../modules/cluster_views/views.ts";
import { gitlabJwt } from "../../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../../kas/support/in-process.ts";
import { until } from "../../../support/until.ts";
import { kasApi, metricsOf, metricValue } from "../../agent_configuration/helpers.ts";
import { eventsOf } from "../helpers.ts";

const nodes = (total: number): ClusterViews => ({
  nodes: {
    total,
    ready: total,
    capacity: { cpuMillis: 0, memoryBytes: 0 },
    allocatable: { cpuMillis: 0, memoryBytes: 0 },
  },
});
/** About 12 KiB of JSON: 20 warnings with long messages. */
const bigWarnings = (n: number): ClusterViews => ({
  warnings: {
    latest: Array.from({ length: 20 }, (_, i) => ({
      namespace: "default",
      object: `Pod/p-${i}`,
      reason: "BackOff",
      message: `${n} ${"x".repeat(500)}`,
      count: n,
      lastSeen: new Date(0).toISOString(),
    })),
  },
});

const SUBSCRIBERS = 1000;
const MAX_SUBSCRIBERS = SUBSCRIBERS + 2;

describe("views API and SSE on one kas replica", () => {
  let kas: InProcessKas;
  let hub: Hub;
  let seq = 1;
  const push = (views: ClusterViews, snapshot = false) =>
    hub.update("42", "stream", { seq: ++seq, snapshot, views });

  /** A raw HTTP/1.1 request for an SSE stream: the socket, and everything read (unless paused). */
  const rawEvents = async (path: string, headers: Record<string, string> = {}, jwt?: string) => {
    const url = new URL(kas.addresses.api!);
    const socket: Socket = connect(Number(url.port), url.hostname);
    let text = "";
    socket.on("data", (d: Buffer) => {
      text += d.toString();
    });
    const head = Object.entries({
      "gitlab-kas-api-request": jwt ?? (await gitlabJwt(kas.apiSecret)),
      ...headers,
    })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    socket.write(`GET ${path} HTTP/1.1\r\nhost: kas\r\n${head}\r\n`);
    return { socket, read: () => text };
  };

  beforeAll(async () => {
    kas = await startInProcessKas(() => {}, {
      clusterViews: { heartbeatMs: 300, maxBufferedBytes: 256 * 1024, maxSubscribers: MAX_SUBSCRIBERS },
    });
    hub = kas.kas.views as Hub;
    await push(nodes(1), true);
  });
  afterAll(async () => {
    await kas?.close();
  });

  test("GET views: the current state; 404 for an agent kas has none of; 401 without GitLab's JWT", async () => {
    const res = await kasApi(kas, "/api/v1/agents/42/views");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ agentId: "42", connected: true, views: nodes(1) });
    expect((await kasApi(kas, "/api/v1/agents/43/views")).status).toBe(404);
    expect((await fetch(`${kas.addresses.api}/api/v1/agents/42/views`)).status).toBe(401);
    expect((await fetch(`${kas.addresses.api}/api/v1/agents/42/events`)).status).toBe(401);
  });

  test("SSE: id per event, a snapshot then changes; Last-Event-ID resumes; heartbeats as comments", async () => {
    const stream = await rawEvents("/api/v1/agents/42/events");
    await until(() => stream.read().includes("event: snapshot"), 5000, "the snapshot");
    await push(nodes(2));
    await until(() => stream.read().includes(`id: 42:${seq}\nevent: change\n`), 5000, "the change");
    expect(stream.read()).toMatch(/^HTTP\/1.1 200 OK\r\n[\s\S]*content-type: text\/event-stream/i);
    await until(() => stream.read().includes(": heartbeat\n\n"), 5000, "a heartbeat");
    stream.socket.destroy();

    const missed = seq;
    await push(nodes(3));
    const resumed = await rawEvents("/api/v1/agents/42/events", { "last-event-id": `42:${missed}` });
    await until(() => resumed.read().includes(`id: 42:${seq}\n`), 5000, "the missed change");
    expect(resumed.read()).not.toContain("event: snapshot");
    resumed.socket.destroy();
  });

  test("1,000 concurrent subscribers on one replica each get the change", async () => {
    const jwt = await gitlabJwt(kas.apiSecret);
    const clients: Awaited<ReturnType<typeof rawEvents>>[] = [];
    try {
      // In batches of 100, each batch's snapshots in before the next (the listener's backlog is not tested here).
      while (clients.length < SUBSCRIBERS) {
        for (let i = 0; i < 100; i++)
          clients.push(await rawEvents(i % 2 ? "/api/v1/events" : "/api/v1/agents/42/events", {}, jwt));
        await until(
          () => clients.every((c) => c.read().includes("event: snapshot")),
          30_000,
          "every snapshot",
        );
      }
      const gauge = async () =>
        metricValue(await metricsOf(kas.addresses.observability), "kas_cluster_views_subscribers");
      expect(await gauge()).toBe(SUBSCRIBERS);
      await push(nodes(1000));
      await until(
        () => clients.every((c) => c.read().includes(`id: 42:${seq}\nevent: change\n`)),
        30_000,
        "the change at every subscriber",
      );
      // The limit: two more are served, then 503.
      const extra = [eventsOf(kas, "/api/v1/events"), eventsOf(kas, "/api/v1/events")];
      await Promise.all(extra.map((c) => c.opened));
      const refused = await kasApi(kas, "/api/v1/events");
      for (const c of extra) c.close();
      expect(refused.status).toBe(503);
      expect(await refused.text()).toMatch(/maximum of 1002 views event subscribers/);
    } finally {
      for (const c of clients) c.socket.destroy();
    }
    await until(
      async () =>
        metricValue(await metricsOf(kas.addresses.observability), "kas_cluster_views_subscribers") === 0,
      10_000,
      "every subscriber gone",
    );
  }, 90_000);

  test("a subscriber that stops reading is cut at the bound; one that reads gets everything", async () => {
    const stuck = await rawEvents("/api/v1/agents/42/events");
    const reader = await rawEvents("/api/v1/agents/42/events");
    await until(() => stuck.read().includes("event: snapshot") && reader.read().includes("event: snapshot"));
    stuck.socket.pause();
    let closed = false;
    stuck.socket.once("close", () => {
      closed = true;
    });
    const dropped = async () =>
      metricValue(
        await metricsOf(kas.addresses.observability),
        "kas_cluster_views_subscribers_dropped_total",
        {
          reason: "slow",
        },
      );
    // ~12 KiB per event: the kernel's socket buffers fill, then kas's bound (256 KiB) is passed.
    let n = 0;
    while ((await dropped()) === 0) {
      if (n > 5000) throw new Error("the stuck subscriber was never cut");
      for (const end = n + 100; n < end; ) {
        await push(bigWarnings(++n));
        // Lets I/O run: the reader, in this process, drains as a real client would.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    expect(await dropped()).toBe(1); // the stuck one only
    await until(() => reader.read().includes(`id: 42:${seq}\n`), 10_000, "the last event at the reader");
    stuck.socket.resume(); // reads what the kernel held, then the end
    await until(() => closed, 10_000, "the stuck subscriber's connection closed");
    reader.socket.destroy();
  }, 60_000);
});
