// An agent's state beyond its views, gathered from what kas's other modules know (handed in by
// the daemon's composition, so that the dashboard depends on no other module's code): the agent
// tracker (name, tunnels, agentk versions), agent configuration's status store (commit, problem),
// GitOps' status store (per manifest project: commit sent, last sync, problem).
import type { AgentStatus, ConfigurationStatus, GitopsProject } from "../api.ts";

/** What the tracker says of a connected agent (the shape of agent_tracker's ConnectedAgent). */
export interface TrackedAgent {
  agentId: string;
  projectId: string;
  agentName: string;
  tunnels: number;
  connectedSince: string;
  pods?: { name: string; version: string; kubernetesVersion?: { gitVersion: string } }[];
}

/** GitOps' status of one manifest project (the shape of the gitops status store's ProjectStatus). */
export interface GitopsProjectState {
  sent?: { commitId: string; at: string };
  sync?: { commitId: string; at: string; error?: string; counts: Record<string, number> };
  problem?: { message: string; at: string };
}

/** Each source is optional: kas without it says nothing of that part. */
export interface StatusSources {
  connectedAgents?: () => Promise<TrackedAgent[]>;
  configuration?: (agentId: string) => Promise<ConfigurationStatus | undefined>;
  gitops?: (agentId: string) => Promise<Map<string, GitopsProjectState>>;
}

/** Names remembered per agent (beyond, the oldest go): a disconnected agent keeps its name. */
const MAX_NAMES = 10_000;

/** A sync report's object statuses (gitops' ReportSync): these count as applied; "failed" as failed. */
const APPLIED = new Set(["applied", "unchanged", "pruned"]);

export class AgentStatuses {
  readonly #names = new Map<string, { name: string; projectId: string }>();

  constructor(private readonly sources: StatusSources) {}

  /** The status of each agent in `agentIds`, and of each connected one not among them. */
  async of(agentIds: string[]): Promise<AgentStatus[]> {
    const tracked = new Map(
      ((await this.sources.connectedAgents?.().catch(() => undefined)) ?? []).map((a) => [a.agentId, a]),
    );
    for (const a of tracked.values()) this.#remember(a);
    const ids = [...new Set([...agentIds, ...tracked.keys()])];
    return Promise.all(ids.map((id) => this.#status(id, tracked.get(id))));
  }

  async #status(agentId: string, tracked: TrackedAgent | undefined): Promise<AgentStatus> {
    const [configuration, gitops] = await Promise.all([
      this.sources.configuration?.(agentId).catch(() => undefined),
      this.sources.gitops?.(agentId).catch(() => undefined),
    ]);
    const known = this.#names.get(agentId);
    return {
      agentId,
      ...(known && { name: known.name, projectId: known.projectId }),
      tunnels: tracked?.tunnels ?? 0,
      ...(tracked && { connectedSince: tracked.connectedSince }),
      agentk: (tracked?.pods ?? []).map((p) => ({
        name: p.name,
        version: p.version,
        ...(p.kubernetesVersion && { kubernetes: p.kubernetesVersion.gitVersion }),
      })),
      ...(configuration && { configuration: pickConfiguration(configuration) }),
      gitops: [...(gitops ?? new Map())].map(([project, s]) => gitopsProject(project, s)),
    };
  }

  #remember(a: TrackedAgent): void {
    this.#names.delete(a.agentId);
    this.#names.set(a.agentId, { name: a.agentName, projectId: a.projectId });
    if (this.#names.size > MAX_NAMES) this.#names.delete(this.#names.keys().next().value!);
  }
}

/** Only what the page shows: never the configuration itself. */
function pickConfiguration(c: ConfigurationStatus): ConfigurationStatus {
  return {
    ...(c.commitId !== undefined && { commitId: c.commitId }),
    ...(c.problem && {
      problem: {
        kind: c.problem.kind,
        message: c.problem.message,
        at: c.problem.at,
        ...(c.problem.commitId !== undefined && { commitId: c.problem.commitId }),
      },
    }),
    ...(c.checkedAt !== undefined && { checkedAt: c.checkedAt }),
  };
}

function gitopsProject(project: string, s: GitopsProjectState): GitopsProject {
  let applied = 0;
  let failed = 0;
  for (const [status, n] of Object.entries(s.sync?.counts ?? {})) {
    if (APPLIED.has(status)) applied += n;
    else if (status === "failed") failed += n;
  }
  return {
    project,
    ...(s.sent && { sent: { commitId: s.sent.commitId, at: s.sent.at } }),
    ...(s.sync && {
      sync: {
        commitId: s.sync.commitId,
        at: s.sync.at,
        applied,
        failed,
        ...(s.sync.error !== undefined && { error: s.sync.error }),
      },
    }),
    ...(s.problem && { problem: { message: s.problem.message, at: s.problem.at } }),
  };
}
