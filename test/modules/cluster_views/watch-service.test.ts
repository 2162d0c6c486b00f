// The cluster views watch on GitLab's gRPC API, served by the real API front (JWT, HTTP/2 beside
// HTTP/1.1) from a small in-memory ViewsHub: what the hub publishes reaches GitLab in order, and
// every way a watch ends (deadline, cancel, a drop, a slow reader) lets go of the subscription.
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ApiRouteTable, createGitLabRpcServer, serveApi } from "../../../cmd/kas/api/index.ts";
import { ReadinessChecks } from "../../../cmd/kas/observability/index.ts";
import {
  addViewsWatchService,
  MAX_PENDING_EVENTS,
} from "../../../modules/cluster_views/kas/watch-service.ts";
import type { AgentViews, ViewEvent, ViewsHub } from "../../../modules/cluster_views/views.ts";
import type { HttpListener } from "../../../tool/http/serve/index.ts";
import { gitlabJwt, silentLogger } from "../../kas/support/fixtures.ts";
import { bearer, gitlabServiceClients, grpcTarget } from "../../support/gitlab-grpc.ts";
import { until } from "../../support/until.ts";

type Subscription = {
  filter: { agentId?: string; lastEventId?: string };
  listener: (event: ViewEvent) => void;
  onDrop: ((reason: string) => void) | undefined;
};

/** A ViewsHub in memory: a snapshot of what it holds on subscribe, then whatever the test publishes. */
class MemoryHub implements ViewsHub {
  readonly subscriptions = new Set<Subscription>();
  readonly views = new Map<string, AgentViews>();
  async current(agentId: string) {
    return this.views.get(agentId);
  }
  async list() {
    return [...this.views.values()];
  }
  subscribe(
    filter: Subscription["filter"],
    listener: Subscription["listener"],
    onDrop?: Subscription["onDrop"],
  ) {
    const sub = { filter, listener, onDrop };
    this.subscriptions.add(sub);
    const agent = filter.agentId && this.views.get(filter.agentId);
    if (agent && !filter.lastEventId)
      listener({ type: "snapshot", id: `${agent.agentId}:${agent.seq}`, agent });
    return () => this.subscriptions.delete(sub);
  }
  publish(event: ViewEvent) {
    const agentId = event.type === "snapshot" ? event.agent.agentId : event.agentId;
    for (const s of [...this.subscriptions]) if (s.filter.agentId === agentId) s.listener(event);
  }
  drop(reason: string) {
    for (const s of [...this.subscriptions]) s.onDrop?.(reason);
  }
}

const AGENT: AgentViews = {
  agentId: "42",
  connected: true,
  seq: 3,
  updatedAt: "2026-01-01T00:00:00.000Z",
  views: {
    nodes: {
      total: 2,
      ready: 2,
      capacity: { cpuMillis: 4000, memoryBytes: 8e9 },
      allocatable: { cpuMillis: 3800, memoryBytes: 7e9 },
    },
  },
};
const change = (seq: number): ViewEvent => ({
  type: "change",
  id: `42:${seq}`,
  agentId: "42",
  seq,
  updatedAt: "2026-01-01T00:00:01.000Z",
  views: {
    pods: {
      namespaces: {
        default: { phases: { Pending: 0, Running: seq, Succeeded: 0, Failed: 0, Unknown: 0 }, restarts: 0 },
      },
    },
  },
});

type WatchEvent = { event_id: string; event_type: string; event_json: string };

describe("ClusterViewsWatchService.WatchAgentViews", () => {
  const secret = new Uint8Array(randomBytes(32));
  const hub = new MemoryHub();
  let listener: HttpListener;
  let client: grpc.Client;
  let jwt: string;
  const watch = (request: object, options: grpc.CallOptions = {}, metadata = bearer(jwt)) =>
    (
      client as unknown as {
        WatchAgentViews(
          r: object,
          m: grpc.Metadata,
          o: grpc.CallOptions,
        ): grpc.ClientReadableStream<WatchEvent>;
      }
    ).WatchAgentViews(request, metadata, options);
  /** The events of `call` as they come, and how it ended. */
  const follow = (call: grpc.ClientReadableStream<WatchEvent>) => {
    const events: WatchEvent[] = [];
    const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
      call.on("data", (e: WatchEvent) => events.push(e));
      call.on("error", resolve);
      call.on("end", () => resolve(undefined));
    });
    return { events, ended };
  };

  beforeAll(async () => {
    const rpc = createGitLabRpcServer({ secret, readiness: new ReadinessChecks(), log: silentLogger() });
    addViewsWatchService(rpc, hub);
    rpc.start();
    listener = await serveApi({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      secret,
      routes: new ApiRouteTable(),
      grpc: rpc.connections,
    });
    jwt = await gitlabJwt(secret, { iss: "gitlab.example.com" });
    client = new (gitlabServiceClients().ClusterViewsWatch)(
      grpcTarget(listener.url),
      grpc.credentials.createInsecure(),
    );
  });
  beforeEach(() => {
    hub.views.set("42", AGENT);
  });
  afterAll(async () => {
    client?.close();
    await listener?.close(0);
  });

  it("a snapshot first, then each change in order, each carrying the hub's event as JSON", async () => {
    const call = watch({ agent_id: "42" });
    const { events } = follow(call);
    await until(() => hub.subscriptions.size === 1, 5_000, "the watch to subscribe");
    await until(() => events.length === 1, 5_000, "the snapshot");
    hub.publish(change(4));
    hub.publish({ type: "disconnected", id: "42:4", agentId: "42" });
    hub.publish(change(99)); // another agent's watch would not see this; this one does, in order
    await until(() => events.length === 4, 5_000, "the changes");
    expect(events.map((e) => [e.event_id, e.event_type])).toEqual([
      ["42:3", "snapshot"],
      ["42:4", "change"],
      ["42:4", "disconnected"],
      ["42:99", "change"],
    ]);
    expect(JSON.parse(events[0]!.event_json)).toEqual({ type: "snapshot", id: "42:3", agent: AGENT });
    expect(JSON.parse(events[1]!.event_json)).toEqual(change(4));
    call.cancel();
    await until(() => hub.subscriptions.size === 0, 5_000, "the cancelled watch to unsubscribe");
  });

  it("resumes after last_event_id: the hub is asked for what came after it", async () => {
    const call = watch({ agent_id: "42", last_event_id: "42:3" });
    const { events } = follow(call);
    await until(() => hub.subscriptions.size === 1, 5_000, "the watch to subscribe");
    expect([...hub.subscriptions][0]!.filter).toEqual({ agentId: "42", lastEventId: "42:3" });
    hub.publish(change(4));
    await until(() => events.length === 1, 5_000, "the change");
    expect(events[0]!.event_id).toBe("42:4");
    call.cancel();
    await until(() => hub.subscriptions.size === 0, 5_000, "unsubscribed");
  });

  it("DEADLINE_EXCEEDED at the call's deadline, and the subscription is gone", async () => {
    const { ended } = follow(watch({ agent_id: "42" }, { deadline: Date.now() + 500 }));
    await until(() => hub.subscriptions.size === 1, 5_000, "the watch to subscribe");
    expect((await ended)?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    await until(() => hub.subscriptions.size === 0, 5_000, "the expired watch to unsubscribe");
  });

  it("UNAVAILABLE with the hub's reason when the hub drops the watch", async () => {
    const { ended } = follow(watch({ agent_id: "42" }));
    await until(() => hub.subscriptions.size === 1, 5_000, "the watch to subscribe");
    hub.drop("kas is shutting down");
    const err = await ended;
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(err?.details).toMatch(/kas is shutting down/);
    expect(hub.subscriptions.size).toBe(0);
  });

  it(`RESOURCE_EXHAUSTED past ${MAX_PENDING_EVENTS} events waiting for the caller; nothing more is buffered`, async () => {
    const { events, ended } = follow(watch({ agent_id: "42" }));
    await until(() => hub.subscriptions.size === 1, 5_000, "the watch to subscribe");
    for (let seq = 4; seq < 4 + 3 * MAX_PENDING_EVENTS; seq++) hub.publish(change(seq));
    expect(hub.subscriptions.size).toBe(0);
    expect((await ended)?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(events.length).toBeLessThanOrEqual(MAX_PENDING_EVENTS + 1);
  });

  it("INVALID_ARGUMENT for a bad agent id or another agent's event id; UNAUTHENTICATED without the JWT", async () => {
    for (const request of [
      { agent_id: "0" },
      { agent_id: "42", last_event_id: "43:1" },
      { agent_id: "42", last_event_id: "x" },
    ]) {
      const err = await follow(watch(request)).ended;
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    }
    const refused = await follow(watch({ agent_id: "42" }, {}, bearer("forged"))).ended;
    expect(refused?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(hub.subscriptions.size).toBe(0);
  });

  // Last: it closes the front.
  it("kas closing: a running watch ends UNAVAILABLE after the grace, and lets go of the subscription", async () => {
    const { ended } = follow(watch({ agent_id: "42" }));
    await until(() => hub.subscriptions.size === 1, 5_000, "the watch to subscribe");
    await listener.close(100);
    expect((await ended)?.code).toBe(grpc.status.UNAVAILABLE);
    await until(() => hub.subscriptions.size === 0, 5_000, "the drained watch to unsubscribe");
  });
});
