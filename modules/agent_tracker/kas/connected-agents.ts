// The connected-agents list GitLab asks for: each replica summarizes its own tunnels per agent,
// publishes the summary in Redis, and any replica merges the summaries of all live replicas.
import { parseJsonObject } from "../../../tool/untrusted-json.ts";
import type { AgentIdentity } from "../../runtime/index.ts";
import { isConnectionId } from "./connection-id.ts";

/** An agentk replica, as it reported itself over its tunnel (`AgentTrackerService.ReportAgent`). */
export interface AgentPod {
  namespace: string;
  name: string;
  version: string;
  /** The commit agentk was built from; absent when it did not say (and in older replicas' summaries). */
  commitId?: string;
  /** Its cluster's `/version`; absent until agentk could read it. */
  kubernetesVersion?: KubernetesVersion;
}

/** A cluster's version, as its `/version` says it (GitLab's entity.KubernetesVersion). */
export interface KubernetesVersion {
  major: string;
  minor: string;
  gitVersion: string;
  platform: string;
}

/** Bounds on what an agent may report, and on what a summary read back from Redis may hold. */
export const AGENT_POD_LIMITS = { field: 253, pods: 100 } as const;

/** Connections listed per agent (the `tunnels` count stays exact beyond it). */
export const AGENT_CONNECTION_LIMIT = 1000;

/** One agent connection (tunnel) to some kas replica. */
export interface AgentConnection {
  /** Unique per connection (connection-id.ts): GitLab's `connection_id`. */
  connectionId: string;
  /** When it connected (ISO 8601). */
  connectedAt: string;
  /** The agentk replica behind it, once it reported itself. */
  pod?: AgentPod;
}

/** What the tracker knows of a tunnel beyond the router's record: its id, and who reported over it. */
export interface ConnectionRecord {
  connectionId: string;
  pod?: AgentPod;
}

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
  /**
   * Each tunnel, oldest first (at most AGENT_CONNECTION_LIMIT). Absent only in a summary published
   * by a kas replica older than connection ids.
   */
  connections?: AgentConnection[];
}

export interface AgentFilter {
  projectId?: string;
  agentId?: string;
}

interface Tunnel {
  identity: Pick<AgentIdentity, "agentId" | "projectId" | "agentName">;
  stats: { connectedAt: Date };
}

/** One agent's tunnels at this replica as a list entry (each with what `recordOf` knows); undefined without any. */
export function summarize<T extends Tunnel>(
  tunnels: Iterable<T>,
  recordOf: (tunnel: T) => ConnectionRecord,
): ConnectedAgent | undefined {
  let summary: ConnectedAgent | undefined;
  let since = Number.POSITIVE_INFINITY;
  const connections: AgentConnection[] = [];
  for (const t of tunnels) {
    since = Math.min(since, t.stats.connectedAt.getTime());
    const { agentId, projectId, agentName } = t.identity;
    summary ??= { agentId, projectId, agentName, tunnels: 0, connectedSince: "" };
    summary.tunnels++;
    const { connectionId, pod } = recordOf(t);
    connections.push({ connectionId, connectedAt: t.stats.connectedAt.toISOString(), ...(pod && { pod }) });
  }
  if (summary) {
    summary.connectedSince = new Date(since).toISOString();
    const pods = connections.flatMap((c) => c.pod ?? []);
    if (pods.length > 0) summary.pods = normalizePods(pods);
    summary.connections = normalizeConnections(connections);
  }
  return summary;
}

/** Oldest first (ties by id), one entry per id, bounded: the same list whatever order they came in. */
function normalizeConnections(list: AgentConnection[]): AgentConnection[] {
  const key = (c: AgentConnection) =>
    `${c.connectedAt}\u0000${c.connectionId.padStart(19, "0")}\u0000${c.pod ? podKey(c.pod) : ""}`;
  const sorted = list.map((c) => [key(c), c] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const seen = new Set<string>();
  const out: AgentConnection[] = [];
  for (const [, c] of sorted) {
    if (seen.has(c.connectionId)) continue;
    seen.add(c.connectionId);
    out.push(c);
    if (out.length === AGENT_CONNECTION_LIMIT) break;
  }
  return out;
}

const kubeKey = (k: KubernetesVersion | undefined) =>
  k ? `${k.major}\u0000${k.minor}\u0000${k.gitVersion}\u0000${k.platform}` : "";
const podKey = (p: AgentPod) =>
  `${p.namespace}\u0000${p.name}\u0000${p.version}\u0000${p.commitId ?? ""}\u0000${kubeKey(p.kubernetesVersion)}`;

/** Only the fields a pod has (nothing else a summary read back may carry). */
function podOf(p: AgentPod): AgentPod {
  const { namespace, name, version, commitId, kubernetesVersion: k } = p;
  return {
    namespace,
    name,
    version,
    ...(commitId !== undefined && { commitId }),
    ...(k && {
      kubernetesVersion: { major: k.major, minor: k.minor, gitVersion: k.gitVersion, platform: k.platform },
    }),
  };
}

/** Sorted, without duplicates (several tunnels of one pod), bounded. */
function normalizePods(pods: AgentPod[]): AgentPod[] {
  const unique = new Map(pods.map((p) => [podKey(p), podOf(p)]));
  return [...unique.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, AGENT_POD_LIMITS.pods)
    .map(([, p]) => p);
}

/** A pod as read from Redis (shared: checked like any input); undefined unless it is one. */
function parsePod(v: unknown): AgentPod | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const { namespace, name, version, commitId, kubernetesVersion } = v as Record<string, unknown>;
  if (!text(namespace) || !text(name) || !text(version)) return undefined;
  if (commitId !== undefined && !text(commitId)) return undefined;
  const pod: AgentPod = { namespace, name, version, ...(commitId !== undefined && { commitId }) };
  if (kubernetesVersion === undefined) return pod;
  const k = parseKubernetesVersion(kubernetesVersion);
  return k && { ...pod, kubernetesVersion: k };
}

/** A string an agent may report (and a summary may hold): bounded. */
const text = (x: unknown): x is string => typeof x === "string" && x.length <= AGENT_POD_LIMITS.field;

/** A Kubernetes version as read from Redis; undefined unless it is one. */
function parseKubernetesVersion(v: unknown): KubernetesVersion | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const { major, minor, gitVersion, platform } = v as Record<string, unknown>;
  return text(major) && text(minor) && text(gitVersion) && text(platform)
    ? { major, minor, gitVersion, platform }
    : undefined;
}

/** A connection as read from Redis; undefined unless it is one. */
function parseConnection(v: unknown): AgentConnection | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const { connectionId, connectedAt, pod } = v as Record<string, unknown>;
  if (!isConnectionId(connectionId)) return undefined;
  if (typeof connectedAt !== "string" || Number.isNaN(Date.parse(connectedAt))) return undefined;
  const connection: AgentConnection = { connectionId, connectedAt: new Date(connectedAt).toISOString() };
  if (pod === undefined) return connection;
  const parsed = parsePod(pod);
  return parsed && { ...connection, pod: parsed };
}

/**
 * Another replica's summary as read back from Redis; undefined unless it is one (Redis is shared,
 * so what is read is checked like any input).
 */
export function parseSummary(text: string): ConnectedAgent | undefined {
  const v = parseJsonObject(text);
  if (v === undefined) return undefined;
  const { agentId, projectId, agentName, tunnels, connectedSince, pods, connections } = v;
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
  if (pods !== undefined) {
    if (!Array.isArray(pods) || pods.length === 0 || pods.length > AGENT_POD_LIMITS.pods) return undefined;
    const parsed = pods.map(parsePod);
    if (parsed.some((p) => p === undefined)) return undefined;
    summary.pods = normalizePods(parsed as AgentPod[]);
  }
  if (connections !== undefined) {
    if (!Array.isArray(connections) || connections.length === 0) return undefined;
    if (connections.length > Math.min(tunnels, AGENT_CONNECTION_LIMIT)) return undefined;
    const parsed = connections.map(parseConnection);
    if (parsed.some((c) => c === undefined)) return undefined;
    summary.connections = normalizeConnections(parsed as AgentConnection[]);
  }
  return summary;
}

/**
 * The summaries of several replicas as one list: tunnels added up, the earliest connection kept,
 * pods and connections put together; by agent id.
 */
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
      if (s.connections)
        seen.connections = normalizeConnections([...(seen.connections ?? []), ...s.connections]);
    }
  }
  // Ids are int64 in decimal: compared as BigInt, not as doubles.
  return [...merged.values()].sort((a, b) => (BigInt(a.agentId) < BigInt(b.agentId) ? -1 : 1));
}
