import { EventEmitter } from "node:events";
import type { TunnelSession } from "../tunnel/session/index.ts";

/** A tunnel the registry can route over: any TunnelSession, whatever its identity type. */
export type Tunnel = TunnelSession<unknown>;

export interface LocalRegistryEvents {
  /** `tunnel` was registered for `agentId` (draining or not): once per registration. */
  added: [agentId: string, tunnel: Tunnel];
  /** `tunnel` left `agentId`'s set (it closed, or was unregistered): once per registration. */
  removed: [agentId: string, tunnel: Tunnel];
  /** `tunnel` can take streams for `agentId` (a new registration). */
  available: [agentId: string, tunnel: Tunnel];
  /** The last tunnel to `agentId` that could take streams has closed or is draining. */
  unavailable: [agentId: string];
}

/**
 * The tunnels this replica holds, by agent id (an agent may have several: several agent
 * replicas, several connections each): the one record of them. Closed tunnels drop out by
 * themselves; draining ones (GoAway either way) stay until closed but take no new streams.
 * What else follows the tunnels (metrics, the agent list, waiting dials) follows its events.
 */
export class LocalRegistry extends EventEmitter<LocalRegistryEvents> {
  readonly #tunnels = new Map<string, Set<Tunnel>>();
  /** Per tunnel: the agent ids it is registered under, and how to stop watching it. */
  readonly #watched = new Map<Tunnel, { agentIds: Set<string>; unwatch: () => void }>();
  /** Agents announced "available" and not since "unavailable": events fire on transitions only. */
  readonly #reachable = new Set<string>();

  /** Agent ids with at least one tunnel that takes streams. */
  agentIds(): string[] {
    return [...this.#tunnels.keys()].filter((id) => this.usable(id));
  }

  /** Agent ids with any tunnel here, draining ones included. */
  registeredAgentIds(): string[] {
    return [...this.#tunnels.keys()];
  }

  /** Every tunnel registered for the agent, draining ones included. */
  tunnels(agentId: string): ReadonlySet<Tunnel> {
    return this.#tunnels.get(agentId) ?? new Set();
  }

  /** True when the agent has a tunnel here that takes new streams. */
  usable(agentId: string): boolean {
    for (const t of this.tunnels(agentId)) if (isUsable(t)) return true;
    return false;
  }

  /** Adds a tunnel for `agentId`; it leaves when it closes (or by calling the returned function). */
  register(agentId: string, tunnel: Tunnel): () => void {
    const unregister = () => this.#remove(agentId, tunnel);
    if (tunnel.closed) return unregister;
    const set = this.#tunnels.get(agentId) ?? new Set();
    this.#tunnels.set(agentId, set);
    if (set.has(tunnel)) return unregister;
    set.add(tunnel);
    this.#watch(tunnel).add(agentId);
    this.emit("added", agentId, tunnel);
    if (isUsable(tunnel)) {
      this.#reachable.add(agentId);
      this.emit("available", agentId, tunnel);
    }
    return unregister;
  }

  /** The usable tunnel with the fewest open streams, skipping `exclude`. */
  pick(agentId: string, exclude?: ReadonlySet<Tunnel>): Tunnel | undefined {
    let best: Tunnel | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (const t of this.tunnels(agentId)) {
      if (!isUsable(t) || exclude?.has(t)) continue;
      const load = t.stats.openStreams;
      if (load < bestLoad) {
        best = t;
        bestLoad = load;
      }
    }
    return best;
  }

  #remove(agentId: string, tunnel: Tunnel): void {
    const set = this.#tunnels.get(agentId);
    if (!set?.delete(tunnel)) return;
    if (set.size === 0) this.#tunnels.delete(agentId);
    const watched = this.#watched.get(tunnel)!;
    watched.agentIds.delete(agentId);
    if (watched.agentIds.size === 0) {
      watched.unwatch();
      this.#watched.delete(tunnel);
    }
    this.emit("removed", agentId, tunnel);
    this.#update(agentId);
  }

  /** One pair of listeners per tunnel, however many agent ids it serves. */
  #watch(tunnel: Tunnel): Set<string> {
    const existing = this.#watched.get(tunnel);
    if (existing) return existing.agentIds;
    const agentIds = new Set<string>();
    const onGoAway = () => {
      for (const id of agentIds) this.#update(id);
    };
    const onClose = () => {
      for (const id of [...agentIds]) this.#remove(id, tunnel);
    };
    tunnel.on("goaway", onGoAway);
    tunnel.on("close", onClose);
    const unwatch = () => {
      tunnel.off("goaway", onGoAway);
      tunnel.off("close", onClose);
    };
    this.#watched.set(tunnel, { agentIds, unwatch });
    return agentIds;
  }

  #update(agentId: string): void {
    if (this.usable(agentId) || !this.#reachable.delete(agentId)) return;
    this.emit("unavailable", agentId);
  }
}

function isUsable(t: Tunnel): boolean {
  return !t.closed && !t.draining;
}
