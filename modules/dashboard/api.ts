// What the dashboard's JSON API (`/api/status`, `/api/changes`, `/api/history`) answers, shared by
// the kas half and the page: it imports nothing but the views' shapes, so the page may import it.
import type { PodPhase } from "../cluster_views/views.ts";

/** One agentk replica behind the agent's tunnels, as it reported itself. */
export interface AgentkReplica {
  name: string;
  version: string;
  /** The cluster's `gitVersion` (e.g. v1.30.2), once agentk could read it. */
  kubernetes?: string;
}

export interface ConfigurationStatus {
  /** The commit the configuration was read at ("" when the project has none). */
  commitId?: string;
  /** Why the newest commit is not what the agent has. */
  problem?: { kind: string; message: string; commitId?: string; at: string };
  /** When kas last reached the repository. */
  checkedAt?: string;
}

/** One manifest project of the agent's GitOps. */
export interface GitopsProject {
  project: string;
  /** The commit kas last sent, and when. */
  sent?: { commitId: string; at: string };
  /** The agent's last sync report. */
  sync?: { commitId: string; at: string; applied: number; failed: number; error?: string };
  /** kas's last refusal or repository problem. */
  problem?: { message: string; at: string };
}

/** An agent's state beyond its views: who it is, its tunnels, configuration and GitOps. */
export interface AgentStatus {
  agentId: string;
  /** Its name in its project (known while connected, or seen connected by this replica). */
  name?: string;
  projectId?: string;
  /** Tunnels up, across kas replicas (agentk replicas x connections each). */
  tunnels: number;
  /** When the oldest tunnel connected (ISO 8601). */
  connectedSince?: string;
  agentk: AgentkReplica[];
  configuration?: ConfigurationStatus;
  gitops: GitopsProject[];
}

export type ChangeKind =
  | "scaled"
  | "rollout-started"
  | "rollout-stuck"
  | "rolled-out"
  | "node-not-ready"
  | "node-ready"
  | "pod-trouble"
  | "warning"
  | "connected"
  | "disconnected";

/** Something that changed in an agent's cluster, derived by kas from two consecutive views. */
export interface Change {
  agentId: string;
  /** ISO 8601: when kas learnt of it (a warning: when it was last seen). */
  at: string;
  kind: ChangeKind;
  /** The object at fault or changed: "Kind namespace/name" (a node: "Node name"). */
  object: string;
  /** What happened, in words. */
  text: string;
}

/** An agent's counts at one time (the history's point). */
export interface Sample {
  /** Milliseconds since the epoch (the start of the sample's bucket). */
  t: number;
  nodesReady: number;
  nodesTotal: number;
  pods: Record<PodPhase, number>;
  restarts: number;
  /** Warning events in the view (newest, at most the view's bound). */
  warnings: number;
  /** Rollouts not complete. */
  rollouts: number;
}

export interface AgentHistory {
  agentId: string;
  /** Oldest first, one per bucket at most. */
  samples: Sample[];
  /** Newest first. */
  changes: Change[];
}
