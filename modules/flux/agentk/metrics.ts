import { Counter, Gauge, type Registry } from "prom-client";

export interface FluxAgentMetrics {
  /** Receiver calls after a push, by result (triggered, failed). */
  triggers: Counter<"result">;
  /** Projects the open stream to kas follows. */
  followed: Gauge;
}

/** Registered once per registry (a fresh module instance runs each leader term). */
function once<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export function createFluxAgentMetrics(registry: Registry): FluxAgentMetrics {
  return {
    triggers: once(
      registry,
      "agentk_flux_reconcile_triggers_total",
      () =>
        new Counter({
          name: "agentk_flux_reconcile_triggers_total",
          help: "Flux webhook Receivers called after a push to the GitLab project they follow, by result (triggered, failed).",
          labelNames: ["result"],
          registers: [registry],
        }),
    ),
    followed: once(
      registry,
      "agentk_flux_followed_projects",
      () =>
        new Gauge({
          name: "agentk_flux_followed_projects",
          help: "GitLab projects whose pushes agentk follows for Flux (its Receivers' projects).",
          registers: [registry],
        }),
    ),
  };
}
