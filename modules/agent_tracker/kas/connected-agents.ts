// The connected-agents list GitLab asks for: each replica summarizes its own tunnels per agent,
// publishes the summary in Redis, and any replica merges the summaries of all live replicas.
import type { AgentIdentity } from "../../runtime/index.ts";

/** An agent with tunnels to kas, as the API lists it. */
export interface ConnectedAgent {
  agentId: string;
  projectId: string;
  agentName: string;
  /** Tunnels up (agent replicas x connections each), across kas replicas. */
  tunnels: number;
  /** When the oldest of them connected (ISO 8601). */
  connectedSince: string;
}

export interface AgentFilter {
  projectId?: string;
  agentId?: string;
}

/** One agent's tunnels at this replica as a list entry; undefined without any. */
export function summarize(
  tunnels: Iterable<{
    identity: Pick<AgentIdentity, "agentId" | "projectId" | "agentName">;
    stats: { connectedAt: Date };
  }>,
): ConnectedAgent | undefined {
  let summary: ConnectedAgent | undefined;
  let since = Number.POSITIVE_INFINITY;
  for (const t of tunnels) {
    since = Math.min(since, t.stats.connectedAt.getTime());
    const { agentId, projectId, agentName } = t.identity;
    summary ??= { agentId, projectId, agentName, tunnels: 0, connectedSince: "" };
    summary.tunnels++;
  }
  if (summary) summary.connectedSince = new Date(since).toISOString();
  return summary;
}

/**
 * Another replica's summary as read back from Redis; undefined unless it is one (Redis is shared,
 * so what is read is checked like any input).
 */
export function parseSummary(text: string): ConnectedAgent | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null) return undefined;
  const { agentId, projectId, agentName, tunnels, connectedSince } = v as Record<string, unknown>;
  const id = (x: unknown): x is string => typeof x === "string" && /^[1-9]\d*$/.test(x);
  if (!id(agentId) || !id(projectId) || typeof agentName !== "string") return undefined;
  if (typeof tunnels !== "number" || !Number.isSafeInteger(tunnels) || tunnels < 1) return undefined;
  if (typeof connectedSince !== "string" || Number.isNaN(Date.parse(connectedSince))) return undefined;
  return { agentId, projectId, agentName, tunnels, connectedSince: new Date(connectedSince).toISOString() };
}

/** The summaries of several replicas as one list: tunnels added up, the earliest connection kept; by agent id. */
export function mergeSummaries(
  summaries: Iterable<ConnectedAgent>,
  filter: AgentFilter = {},
): ConnectedAgent[] {
  const merged = new Map<string, ConnectedAgent>();
  for (const s of summaries) {
    if (filter.projectId !== undefined && s.projectId !== filter.projectId) continue;
    if (filter.agentId !== undefined && s.agentId !== filter.agentId) continue;
    const seen = merged.get(s.agentId);
    if (!seen) merged.set(s.agentId, { ...s });
    else {
      seen.tunnels += s.tunnels;
      if (s.connectedSince < seen.connectedSince) seen.connectedSince = s.connectedSince;
    }
  }
  // Ids are int64 in decimal: compared as BigInt, not as doubles.
  return [...merged.values()].sort((a, b) => (BigInt(a.agentId) < BigInt(b.agentId) ? -1 : 1));
}
