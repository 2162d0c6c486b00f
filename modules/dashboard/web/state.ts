// What the page knows: every agent's views, kept up to date from the event stream. Pure (no DOM),
// so that the rules are tested apart from the browser.
import type { AgentViews, Rollout, ViewEvent } from "../../cluster_views/views.ts";

export type Agents = ReadonlyMap<string, AgentViews>;

/** The agents after `event`: a snapshot replaces, a change replaces the views it carries (never an older seq). */
export function applyEvent(agents: Agents, event: ViewEvent): Agents {
  const next = new Map(agents);
  switch (event.type) {
    case "snapshot":
      next.set(event.agent.agentId, event.agent);
      break;
    case "change": {
      const known = agents.get(event.agentId);
      if (known && event.seq <= known.seq) return agents;
      next.set(event.agentId, {
        agentId: event.agentId,
        connected: known?.connected ?? true,
        seq: event.seq,
        updatedAt: event.updatedAt,
        views: { ...known?.views, ...event.views },
      });
      break;
    }
    case "connected":
    case "disconnected": {
      const known = agents.get(event.agentId);
      const connected = event.type === "connected";
      if (known?.connected === connected) return agents;
      next.set(
        event.agentId,
        known
          ? { ...known, connected }
          : { agentId: event.agentId, connected, seq: 0, updatedAt: new Date().toISOString(), views: {} },
      );
      break;
    }
  }
  return next;
}

/** Agents in a stable order: numeric ids as numbers. */
export function sortedAgents(agents: Agents): AgentViews[] {
  return [...agents.values()].sort((a, b) => a.agentId.localeCompare(b.agentId, "en", { numeric: true }));
}

/** Pods of every namespace, by phase, and their restarts. */
export function podTotals(agent: AgentViews): {
  total: number;
  running: number;
  pending: number;
  failed: number;
  restarts: number;
} {
  const totals = { total: 0, running: 0, pending: 0, failed: 0, restarts: 0 };
  for (const ns of Object.values(agent.views.pods?.namespaces ?? {})) {
    for (const n of Object.values(ns.phases)) totals.total += n;
    totals.running += ns.phases.Running ?? 0;
    totals.pending += ns.phases.Pending ?? 0;
    totals.failed += ns.phases.Failed ?? 0;
    totals.restarts += ns.restarts;
  }
  return totals;
}

/** Rollouts not complete: the ones worth a look. */
export function rolloutsInProgress(agent: AgentViews): Rollout[] {
  return (agent.views.workloads?.rollouts ?? []).filter((r) => r.state !== "complete");
}

export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1) {
    bytes /= 1024;
    i++;
  }
  return `${bytes >= 10 || i === 0 ? Math.round(bytes) : bytes.toFixed(1)} ${units[i]}`;
}

export function formatCpu(millis: number): string {
  return millis % 1000 === 0 ? `${millis / 1000}` : `${(millis / 1000).toFixed(1)}`;
}
