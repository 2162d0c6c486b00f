import { Counter, Gauge, type Registry } from "prom-client";

export interface FluxKasMetrics {
  /** GitLab's flux_git_push_notifications_total: pushes sent to agents. */
  notified: Counter;
  /** GitLab's flux_dropped_git_push_notifications_total: pushes a busy stream could not queue. */
  dropped: Counter;
  /** Pushes of a followed project not sent: the agent may not read it, or GitLab could not say. */
  refused: Counter<"reason">;
  streams: Gauge;
  /** Projects named by the open streams (a project two agents follow counts twice). */
  followed: Gauge;
}

export function createFluxKasMetrics(registry: Registry): FluxKasMetrics {
  return {
    notified: new Counter({
      name: "kas_flux_git_push_notifications_total",
      help: "Git push notifications sent to agents' Flux modules (ReconcileProjects).",
      registers: [registry],
    }),
    dropped: new Counter({
      name: "kas_flux_dropped_git_push_notifications_total",
      help: "Git push notifications dropped because an agent's stream had too many waiting.",
      registers: [registry],
    }),
    refused: new Counter({
      name: "kas_flux_git_push_notifications_refused_total",
      help: "Git push notifications of a project an agent follows not sent, by reason (not_found, forbidden, unavailable).",
      labelNames: ["reason"],
      registers: [registry],
    }),
    streams: new Gauge({
      name: "kas_flux_streams",
      help: "Open ReconcileProjects streams.",
      registers: [registry],
    }),
    followed: new Gauge({
      name: "kas_flux_followed_projects",
      help: "Projects the open ReconcileProjects streams follow, summed over the streams.",
      registers: [registry],
    }),
  };
}
