import type { EventEmitter } from "node:events";
import type { Router } from "../../../lib/router/index.ts";
import type { AgentSession, AgentTunnelEvents } from "../../runtime/index.ts";
import {
  type AgentFilter,
  type AgentPod,
  type ConnectedAgent,
  mergeSummaries,
  parseSummary,
  summarize,
} from "./connected-agents.ts";

/**
 * Which agents have tunnels: this replica's, from the tunnels it serves, and every live replica's,
 * through the summaries each publishes in Redis (`router.cluster.describe`).
 */
export class AgentTracker {
  readonly #router: Router;
  /** This replica's open tunnels per agent id. */
  readonly #byAgent = new Map<string, Set<AgentSession>>();
  /** What the agentk behind each tunnel reported about itself. */
  readonly #pods = new WeakMap<AgentSession, AgentPod>();
  readonly #podOf = (session: AgentSession) => this.#pods.get(session);

  constructor(router: Router, tunnels: EventEmitter<AgentTunnelEvents>) {
    this.#router = router;
    tunnels.on("tunnel", (session) => this.#track(session));
  }

  /** Agents with a tunnel at this replica, optionally only those of one project or one id. */
  localAgents(filter: AgentFilter = {}): ConnectedAgent[] {
    const ids = filter.agentId !== undefined ? [filter.agentId] : this.#byAgent.keys();
    const summaries = [...ids].flatMap((id) => summarize(this.#byAgent.get(id) ?? [], this.#podOf) ?? []);
    return mergeSummaries(summaries, filter);
  }

  /** The agentk behind `session` says who it is; the agent's summary is republished. */
  report(session: AgentSession, pod: AgentPod): void {
    this.#pods.set(session, pod);
    if (this.#byAgent.get(session.identity.agentId)?.has(session)) this.#publish(session.identity.agentId);
  }

  /**
   * Agents with a tunnel at any live replica (through Redis when clustered, else this replica's).
   * Rejects with RegistryUnavailableError when Redis cannot answer.
   */
  async connectedAgents(filter: AgentFilter = {}): Promise<ConnectedAgent[]> {
    const router = this.#router;
    if (!router.clustered) return this.localAgents(filter);
    const { cluster } = router;
    const others = (await cluster.described()).flatMap((d) =>
      d.replicaId === cluster.replicaId ? [] : (parseSummary(d.info) ?? []),
    );
    return mergeSummaries([...this.localAgents(filter), ...others], filter);
  }

  #track(session: AgentSession): void {
    if (session.closed) return; // gone before it was served: no 'close' would remove it
    const { agentId } = session.identity;
    const tunnels = this.#byAgent.get(agentId) ?? new Set<AgentSession>();
    this.#byAgent.set(agentId, tunnels);
    tunnels.add(session);
    this.#publish(agentId);
    session.on("close", () => {
      tunnels.delete(session);
      if (tunnels.size === 0 && this.#byAgent.get(agentId) === tunnels) this.#byAgent.delete(agentId);
      this.#publish(agentId);
    });
  }

  /** This replica's summary of the agent in Redis (removed with its last tunnel). */
  #publish(agentId: string): void {
    if (!this.#router.clustered) return;
    const summary = summarize(this.#byAgent.get(agentId) ?? [], this.#podOf);
    this.#router.cluster.describe(agentId, summary && JSON.stringify(summary));
  }
}
