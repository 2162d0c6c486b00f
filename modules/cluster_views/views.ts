// The cluster views: what agentk computes from its informer cache and kas keeps and fans out.
// Small by construction (counts and bounded lists, never raw objects), whatever the cluster's size.
// This file is the contract between the module's halves, kas's API (REST, SSE, gRPC), ActionCable
// and the dashboard: change it in one place.

/** CPU in millicores, memory in bytes. */
export interface Resources {
  cpuMillis: number;
  memoryBytes: number;
}

/** A node condition that is not as a healthy node has it (Ready not True, a pressure True). */
export interface NodeCondition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

/** A node worth a look: not Ready, or under some pressure. */
export interface NodeProblem {
  name: string;
  ready: boolean;
  conditions: NodeCondition[];
}

export interface NodesView {
  total: number;
  ready: number;
  capacity: Resources;
  allocatable: Resources;
  /** Nodes not Ready or under pressure, by name, bounded (absent from agents older than this field). */
  problems?: NodeProblem[];
}

export type PodPhase = "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";

/** Pods of one namespace: how many are in each phase, and their containers' restarts summed. */
export interface NamespacePods {
  phases: Record<PodPhase, number>;
  restarts: number;
}

/** A pod worth a look: not running as it should (a waiting or terminated reason), or restarting. */
export interface PodProblem {
  namespace: string;
  name: string;
  phase: PodPhase;
  /** The first container's waiting or last termination reason (e.g. CrashLoopBackOff, OOMKilled); "" if none. */
  reason: string;
  restarts: number;
}

export interface PodsView {
  /** By namespace; bounded (the configured namespaces, or the busiest ones up to a limit). */
  namespaces: Record<string, NamespacePods>;
  /** The pods in most trouble (most restarts first), bounded (absent from agents older than this field). */
  problems?: PodProblem[];
}

export type RolloutState = "complete" | "progressing" | "stuck";

export interface Rollout {
  kind: "Deployment" | "StatefulSet" | "DaemonSet";
  namespace: string;
  name: string;
  desired: number;
  updated: number;
  ready: number;
  available: number;
  state: RolloutState;
  /** Why it is not complete, from its conditions (e.g. ProgressDeadlineExceeded and the message); absent when complete. */
  reason?: string;
  message?: string;
}

export interface WorkloadsView {
  /** Bounded: rollouts not complete first, then the rest, up to a limit. */
  rollouts: Rollout[];
  /** How many workloads exist in all (the list may be cut). */
  total: number;
}

export interface Warning {
  namespace: string;
  /** "Kind/name" of the object the event is about. */
  object: string;
  reason: string;
  message: string;
  count: number;
  /** ISO 8601. */
  lastSeen: string;
}

export interface WarningsView {
  /** The latest Warning events, newest first, bounded. */
  latest: Warning[];
}

/** Every view by name; a view the agent's configuration turned off is absent. */
export interface ClusterViews {
  nodes?: NodesView;
  pods?: PodsView;
  workloads?: WorkloadsView;
  warnings?: WarningsView;
}

export type ViewName = keyof ClusterViews;
export const VIEW_NAMES: readonly ViewName[] = ["nodes", "pods", "workloads", "warnings"];

/** An agent's views as kas keeps them. */
export interface AgentViews {
  agentId: string;
  /** Whether some kas replica holds a tunnel of this agent. */
  connected: boolean;
  /** The agent's sequence number of the newest update applied (never goes back within an epoch). */
  seq: number;
  /** ISO 8601 time kas applied the newest update. */
  updatedAt: string;
  views: ClusterViews;
}

/**
 * What kas tells subscribers. `id` is the SSE event id ("<agentId>:<seq>" ordering per agent):
 * - `snapshot`: the agent's whole state (first event of a subscription, and after a resume gap);
 * - `change`: the views that changed (each one replaced whole), with the new `seq`;
 * - `connected` / `disconnected`: the agent's presence changed.
 */
export type ViewEvent =
  | { type: "snapshot"; id: string; agent: AgentViews }
  | { type: "change"; id: string; agentId: string; seq: number; updatedAt: string; views: ClusterViews }
  | { type: "connected" | "disconnected"; id: string; agentId: string };

/** kas's in-process access to views, from any replica (Redis when configured). */
export interface ViewsHub {
  /** The agent's views, or undefined when kas has none (never connected, or expired). */
  current(agentId: string): Promise<AgentViews | undefined>;
  /** Every agent with views. */
  list(): Promise<AgentViews[]>;
  /**
   * Events for one agent (`agentId`) or for all, starting with a snapshot of each (or, with
   * `lastEventId`, only what came after it when kas still can tell). The listener must not block;
   * `onDrop` is called once if the subscriber is cut (too slow, shutdown) with the reason.
   * Returns a function that unsubscribes.
   */
  subscribe(
    filter: { agentId?: string; lastEventId?: string },
    listener: (event: ViewEvent) => void,
    onDrop?: (reason: string) => void,
  ): () => void;
}
