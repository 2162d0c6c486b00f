// Cluster views' kas half: takes each agent's views stream (`ClusterViewsService.PushViews`), keeps
// the latest views where every replica reads them (Redis when configured), publishes each change
// to every replica, and serves them to GitLab: current views and Server-Sent Events on its HTTP API,
// a server-streaming watch on its gRPC API. Others in kas (the dashboard, ActionCable) get the
// `ViewsHub` through `onHub`.
import type * as grpc from "@grpc/grpc-js";
import type { PushViewsRequest } from "../../../proto/gen/cluster_views/v1/cluster_views.ts";
import { type KasModuleFactory, Phase } from "../../runtime/index.ts";
import type { ViewsHub } from "../views.ts";
import { Hub } from "./hub.ts";
import { createClusterViewsMetrics } from "./metrics.ts";
import { PresenceRefresher } from "./presence.ts";
import { agentEventsRoute, allEventsRoute, viewsRoute } from "./routes.ts";
import { addClusterViewsService } from "./rpc.ts";
import { MemoryViewsStore, RedisViewsStore } from "./store.ts";
import { addViewsWatchService } from "./watch-service.ts";

export interface ClusterViewsKasOptions {
  /** Told the hub once it is built (before any listener accepts). */
  onHub?: (hub: ViewsHub) => void;
  /** How long an agent's views outlive the last refresh of its open stream. Default 60 s. */
  presenceTtlMs?: number;
  /** How long the views stay after the agent's stream ended (shown as disconnected). Default 15 min. */
  retainMs?: number;
  /** Period of SSE heartbeats. Default 15 s. */
  heartbeatMs?: number;
  /** Unsent bytes an SSE subscriber may have before it is cut. Default 1 MiB. */
  maxBufferedBytes?: number;
  /** SSE subscribers one replica serves at most. Default 10 000. */
  maxSubscribers?: number;
}

export const CLUSTER_VIEWS_DEFAULTS = {
  presenceTtlMs: 60_000,
  retainMs: 15 * 60_000,
  heartbeatMs: 15_000,
  maxBufferedBytes: 1024 * 1024,
  maxSubscribers: 10_000,
} as const;

export function clusterViewsModule(options: ClusterViewsKasOptions = {}): KasModuleFactory {
  const o = { ...CLUSTER_VIEWS_DEFAULTS, ...options };
  return {
    name: "cluster_views",
    phase: Phase.capability,
    create({ log: parentLog, registry, broadcast, redis, agentRpc, api, gitlabRpc }) {
      const log = parentLog.child({ module: "cluster_views" });
      const metrics = createClusterViewsMetrics(registry);
      const times = { presenceTtlMs: o.presenceTtlMs, retainMs: o.retainMs };
      const store = redis ? new RedisViewsStore(redis, times) : new MemoryViewsStore(times);
      const hub = new Hub({ store, broadcast, log, metrics });
      const streams = new Set<grpc.ServerReadableStream<PushViewsRequest, unknown>>();
      // One refresher for every open stream, each refreshed every third of the presence TTL.
      const presence = new PresenceRefresher({
        periodMs: o.presenceTtlMs / 3,
        refresh: (due) => hub.refresh(due),
        onFailing: (err) => log.warn({ err }, "cannot refresh the views of the agents connected here"),
      });
      addClusterViewsService({ rpc: agentRpc, hub, metrics, log, presence, streams });
      const sse = {
        hub,
        onClose: (reason: string) => {
          if (reason !== "too slow") return;
          metrics.dropped.inc({ reason: "slow" });
          log.info("cut a views events subscriber that reads too slowly");
        },
        heartbeatMs: o.heartbeatMs,
        maxBufferedBytes: o.maxBufferedBytes,
        retryMs: 2000,
        maxSubscribers: o.maxSubscribers,
        subscribers: () => hub.subscribers,
      };
      api.add(viewsRoute(hub));
      api.add(agentEventsRoute(sse));
      api.add(allEventsRoute(sse));
      addViewsWatchService(gitlabRpc, hub);
      o.onHub?.(hub);
      return {
        name: "cluster_views",
        start() {
          hub.start();
          presence.start();
        },
        drain() {
          // SSE clients reconnect to another replica (Last-Event-ID: they miss nothing kas still has).
          hub.close("kas is shutting down");
        },
        async close() {
          presence.close();
          hub.close("kas is shutting down");
          for (const call of streams) call.destroy();
        },
      };
    },
  };
}
