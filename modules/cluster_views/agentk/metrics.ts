import { Counter, Gauge, type Registry } from "prom-client";

export interface ClusterViewsAgentMetrics {
  messages: Counter<"kind">;
  bytes: Counter;
  relists: Counter<"resource">;
  objects: Gauge<"resource">;
}

/** Registered once per registry (a fresh module instance runs each leader term). */
function once<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export function createClusterViewsAgentMetrics(registry: Registry): ClusterViewsAgentMetrics {
  return {
    messages: once(
      registry,
      "agentk_cluster_views_messages_total",
      () =>
        new Counter({
          name: "agentk_cluster_views_messages_total",
          help: "Views messages pushed to kas, by kind (snapshot, change).",
          labelNames: ["kind"],
          registers: [registry],
        }),
    ),
    bytes: once(
      registry,
      "agentk_cluster_views_bytes_total",
      () =>
        new Counter({
          name: "agentk_cluster_views_bytes_total",
          help: "Bytes of views messages pushed to kas (protobuf payload, before gRPC framing).",
          registers: [registry],
        }),
    ),
    relists: once(
      registry,
      "agentk_cluster_views_relists_total",
      () =>
        new Counter({
          name: "agentk_cluster_views_relists_total",
          help: "Lists read again by the informers (after 410 Gone or a failure), by resource.",
          labelNames: ["resource"],
          registers: [registry],
        }),
    ),
    objects: once(
      registry,
      "agentk_cluster_views_objects",
      () =>
        new Gauge({
          name: "agentk_cluster_views_objects",
          help: "Objects in the informer cache (trimmed records), by resource.",
          labelNames: ["resource"],
          registers: [registry],
        }),
    ),
  };
}
