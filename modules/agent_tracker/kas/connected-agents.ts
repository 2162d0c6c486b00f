// The connected-agents list GitLab asks for: each replica summarizes its own tunnels per agent,
// publishes the summary in Redis, and any replica merges the summaries of all live replicas.
import type { AgentIdentity } from "../../runtime/index.ts";

/** An agentk replica, as it reported itself over its tunnel (`AgentTrackerService.ReportAgent`). */
export interface AgentPod {
  namespace: string;
  name: string;
  version: string;
}

/** Bounds on what an agent may report, and on what a summary read back from Redis may hold. */
export const AGENT_POD_LIMITS = { field: 253, pods: 100 } as const;

/** An agent with tunnels to kas, as the API lists it. */
export interface ConnectedAgent {
  agentId: string;
  projectId: string;
  agentName: string;
  /** Tunnels up (agent replicas x connections each), across kas replicas. */
  tunnels: number;
  /** When the oldest of them connected (ISO 8601). */
  connectedSince: string;
  /** The agentk replicas behind the tunnels that reported themselves, sorted; absent when none did. */
  pods?: AgentPod[];
}

export interface AgentFilter {
  projectId?: string;
  agentId?: string;
}

interface Tunnel {
  identity: Pick<AgentIdentity, "agentId" | "projectId" | "agentName">;
  stats: { connectedAt: Date };
}

/** One agent's tunnels at this replica as a list entry (with the pods `podOf` knows); undefined without any. */
export function summarize<T extends Tunnel>(
  tunnels: Iterable<T>,
  podOf: (tunnel: T) => AgentPod | undefined = () => undefined,
): ConnectedAgent | undefined {
  let summary: ConnectedAgent | undefined;
  let since = Number.POSITIVE_INFINITY;
  const pods: AgentPod[] = [];
  for (const t of tunnels) {
    since = Math.min(since, t.stats.connectedAt.getTime());
    const { agentId, projectId, agentName } = t.identity;
    summary ??= { agentId, projectId, agentName, tunnels: 0, connectedSince: "" };
    summary.tunnels++;
    const pod = podOf(t);
    if (pod) pods.push(pod);
  }
  if (summary) {
    summary.connectedSince = new Date(since).toISOString();
    if (pods.length > 0) summary.pods = normalizePods(pods);
  }
  return summary;
}

/** Sorted, without duplicates (several tunnels of one pod), bounded. */
function normalizePods(pods: AgentPod[]): AgentPod[] {
  const key = (p: AgentPod) => `${p.namespace}\u0000${p.name}\u0000${p.version}`;
  const unique = new Map(
    pods.map((p) => [key(p), { namespace: p.namespace, name: p.name, version: p.version }]),
  );
  return [...unique.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, AGENT_POD_LIMITS.pods)
    .map(([, p]) => p);
}

/** A pod as read from Redis (shared: checked like any input); undefined unless it is one. */
function parsePod(v: unknown): AgentPod | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const { namespace, name, version } = v as Record<string, unknown>;
  const text = (x: unknown): x is string => typeof x === "string" && x.length <= AGENT_POD_LIMITS.field;
  return text(namespace) && text(name) && text(version) ? { namespace, name, version } : undefined;
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
  const { agentId, projectId, agentName, tunnels, connectedSince, pods } = v as Record<string, unknown>;
  const id = (x: unknown): x is string => typeof x === "string" && /^[1-9]\d*$/.test(x);
  if (!id(agentId) || !id(projectId) || typeof agentName !== "string") return undefined;
  if (typeof tunnels !== "number" || !Number.isSafeInteger(tunnels) || tunnels < 1) return undefined;
  if (typeof connectedSince !== "string" || Number.isNaN(Date.parse(connectedSince))) return undefined;
  const summary: ConnectedAgent = {
    agentId,
    projectId,
    agentName,
    tunnels,
    connectedSince: new Date(connectedSince).toISOString(),
  };
  if (pods === undefined) return summary;
  if (!Array.isArray(pods) || pods.length === 0 || pods.length > AGENT_POD_LIMITS.pods) return undefined;
  const parsed = pods.map(parsePod);
  if (parsed.some((p) => p === undefined)) return undefined;
  summary.pods = normalizePods(parsed as AgentPod[]);
  return summary;
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
      if (s.pods) seen.pods = normalizePods([...(seen.pods ?? []), ...s.pods]);
    }
  }
  // Ids are int64 in decimal: compared as BigInt, not as doubles.
  return [...merged.values()].sort((a, b) => (BigInt(a.agentId) < BigInt(b.agentId) ? -1 : 1));
}
