import { Counter, Gauge, type Registry } from "prom-client";

export interface ClusterViewsMetrics {
  updates: Counter<"result">;
  events: Counter<"type">;
  subscribers: Gauge;
  dropped: Counter<"reason">;
  streams: Gauge;
}

export function createClusterViewsMetrics(registry: Registry): ClusterViewsMetrics {
  return {
    updates: new Counter({
      name: "kas_cluster_views_updates_total",
      help: "Views updates from agents, by result (applied; stale: an older seq than kept; invalid: refused).",
      labelNames: ["result"],
      registers: [registry],
    }),
    events: new Counter({
      name: "kas_cluster_views_events_total",
      help: "Views events fanned out at this replica (from any replica), by type.",
      labelNames: ["type"],
      registers: [registry],
    }),
    subscribers: new Gauge({
      name: "kas_cluster_views_subscribers",
      help: "Subscribers to views events at this replica (SSE clients and in-process ones).",
      registers: [registry],
    }),
    dropped: new Counter({
      name: "kas_cluster_views_subscribers_dropped_total",
      help: "Subscribers cut by kas, by reason (slow: its unsent bytes passed the bound; backlog; store; failed; shutdown).",
      labelNames: ["reason"],
      registers: [registry],
    }),
    streams: new Gauge({
      name: "kas_cluster_views_streams",
      help: "Agents' views streams open at this replica.",
      registers: [registry],
    }),
  };
}
