import { EventEmitter } from "node:events";
import type { TunnelSession } from "../tunnel/session/index.ts";
import { NoTunnelError } from "./errors.ts";
import { Waiters, type WaitOptions } from "./waiters.ts";

/** A tunnel the registry can route over: any TunnelSession, whatever its identity type. */
export type Tunnel = TunnelSession<unknown>;

export interface LocalRegistryEvents {
  /** `tunnel` can take streams for `agentId` (a new registration). */
  available: [agentId: string, tunnel: Tunnel];
  /** The last tunnel to `agentId` that could take streams has closed or is draining. */
  unavailable: [agentId: string];
}

/**
 * The tunnels this replica holds, by agent id (an agent may have several: several agent
 * replicas, several connections each). Closed tunnels drop out by themselves; draining ones
 * (GoAway either way) stay until closed but take no new streams.
 */
export class LocalRegistry extends EventEmitter<LocalRegistryEvents> {
  readonly #tunnels = new Map<string, Set<Tunnel>>();
  readonly #waiters = new Waiters<Tunnel>();
  /** Per tunnel: the agent ids it is registered under, and how to stop watching it. */
  readonly #watched = new Map<Tunnel, { agentIds: Set<string>; unwatch: () => void }>();
  /** Agents announced "available" and not since "unavailable": events fire on transitions only. */
  readonly #reachable = new Set<string>();

  /** Agent ids with at least one tunnel that takes streams. */
  agentIds(): string[] {
    return [...this.#tunnels.keys()].filter((id) => this.usable(id));
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

  /**
   * Adds a tunnel for `agentId`; it leaves when it closes (or by calling the returned function).
   * Callers waiting for the agent get it, oldest first.
   */
  register(agentId: string, tunnel: Tunnel): () => void {
    const unregister = () => this.#remove(agentId, tunnel);
    if (tunnel.closed) return unregister;
    const set = this.#tunnels.get(agentId) ?? new Set();
    this.#tunnels.set(agentId, set);
    if (set.has(tunnel)) return unregister;
    set.add(tunnel);
    this.#watch(tunnel).add(agentId);
    if (isUsable(tunnel)) {
      this.#reachable.add(agentId);
      this.emit("available", agentId, tunnel);
      this.#waiters.notify(agentId, tunnel);
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

  /**
   * A usable tunnel for the agent: at once if there is one, else the next one registered, until
   * `deadline` (NoTunnelError) or `signal` aborts (its reason).
   */
  wait(agentId: string, options: WaitOptions): Promise<Tunnel> {
    const now = this.pick(agentId);
    if (now) return Promise.resolve(now);
    const start = Date.now();
    return this.#waiters.wait(agentId, options, () => new NoTunnelError(agentId, Date.now() - start));
  }

  /** Callers waiting in `wait`, for one agent or all. */
  waiting(agentId?: string): number {
    return this.#waiters.count(agentId);
  }

  /** Fails every waiter; registered tunnels are left alone (their owner closes them). */
  close(err = new Error("local tunnel registry closed")): void {
    this.#waiters.rejectAll(err);
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
