import type { Router } from "../../../lib/router/index.ts";
import type { AgentSession } from "../../runtime/index.ts";
import {
  type AgentFilter,
  type AgentPod,
  type ConnectedAgent,
  type ConnectionRecord,
  mergeSummaries,
  parseSummary,
  summarize,
} from "./connected-agents.ts";
import { newConnectionId } from "./connection-id.ts";
import { internPod } from "./interned.ts";

/**
 * Which agents have tunnels: this replica's, from the router's record of its tunnels, and every
 * live replica's, through the summaries each publishes in Redis (`router.cluster.describe`).
 */
export class AgentTracker {
  readonly #router: Router;
  /** Each tunnel's connection id (made when first seen) and what the agentk behind it reported. */
  readonly #records = new WeakMap<AgentSession, ConnectionRecord>();
  readonly #recordOf = (session: AgentSession): ConnectionRecord => {
    let record = this.#records.get(session);
    if (record === undefined) {
      record = { connectionId: newConnectionId() };
      this.#records.set(session, record);
    }
    return record;
  };

  constructor(router: Router) {
    this.#router = router;
    // Every tunnel that comes or goes changes its agent's summary.
    router.local.on("added", (agentId) => this.#publish(agentId));
    router.local.on("removed", (agentId) => this.#publish(agentId));
  }

  /** Agents with a tunnel at this replica, optionally only those of one project or one id. */
  localAgents(filter: AgentFilter = {}): ConnectedAgent[] {
    const ids = filter.agentId !== undefined ? [filter.agentId] : this.#router.local.registeredAgentIds();
    const summaries = ids.flatMap((id) => summarize(this.#tunnels(id), this.#recordOf) ?? []);
    return mergeSummaries(summaries, filter);
  }

  /** The agentk behind `session` says who it is; the agent's summary is republished. */
  report(session: AgentSession, pod: AgentPod): void {
    this.#recordOf(session).pod = internPod(pod);
    if (this.#tunnels(session.identity.agentId).has(session)) this.#publish(session.identity.agentId);
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

  /** The agent's tunnels here: the router registers only authenticated agent tunnels. */
  #tunnels(agentId: string): ReadonlySet<AgentSession> {
    return this.#router.local.tunnels(agentId) as ReadonlySet<AgentSession>;
  }

  /** This replica's summary of the agent in Redis (removed with its last tunnel). */
  #publish(agentId: string): void {
    if (!this.#router.clustered) return;
    const summary = summarize(this.#tunnels(agentId), this.#recordOf);
    this.#router.cluster.describe(agentId, summary && JSON.stringify(summary));
  }
}
