import type { AgentViews, ViewEvent, ViewsHub } from "../../modules/cluster_views/views.ts";

/**
 * A ViewsHub in memory for the tests of what consumes one (ActionCable, the dashboard) before or
 * apart from kas's own: `put` sets an agent's state and tells subscribers, `emit` sends any event.
 */
export class MemoryViewsHub implements ViewsHub {
  readonly agents = new Map<string, AgentViews>();
  readonly #subscribers = new Set<{
    agentId: string | undefined;
    listener: (e: ViewEvent) => void;
    onDrop: ((reason: string) => void) | undefined;
  }>();

  get subscribers(): number {
    return this.#subscribers.size;
  }

  async current(agentId: string): Promise<AgentViews | undefined> {
    return this.agents.get(agentId);
  }

  async list(): Promise<AgentViews[]> {
    return [...this.agents.values()];
  }

  subscribe(
    filter: { agentId?: string; lastEventId?: string },
    listener: (event: ViewEvent) => void,
    onDrop?: (reason: string) => void,
  ): () => void {
    const sub = { agentId: filter.agentId, listener, onDrop };
    this.#subscribers.add(sub);
    for (const agent of this.agents.values()) {
      if (sub.agentId === undefined || sub.agentId === agent.agentId)
        listener({ type: "snapshot", id: `${agent.agentId}:${agent.seq}`, agent });
    }
    return () => this.#subscribers.delete(sub);
  }

  /** Sets the agent's whole state and sends a change of every view it has. */
  put(agent: AgentViews): void {
    this.agents.set(agent.agentId, agent);
    const { agentId, seq, updatedAt, views } = agent;
    this.emit({ type: "change", id: `${agentId}:${seq}`, agentId, seq, updatedAt, views });
  }

  /** Marks the agent (dis)connected and says so. */
  presence(agentId: string, connected: boolean): void {
    const agent = this.agents.get(agentId);
    if (agent) agent.connected = connected;
    const seq = agent?.seq ?? 0;
    this.emit({ type: connected ? "connected" : "disconnected", id: `${agentId}:${seq}`, agentId });
  }

  emit(event: ViewEvent): void {
    const agentId = event.type === "snapshot" ? event.agent.agentId : event.agentId;
    for (const sub of this.#subscribers)
      if (sub.agentId === undefined || sub.agentId === agentId) sub.listener(event);
  }

  /** Cuts every subscriber with `reason`. */
  dropAll(reason: string): void {
    for (const sub of this.#subscribers) sub.onDrop?.(reason);
    this.#subscribers.clear();
  }
}
