import type { Candidate } from "./redis-registry.ts";

/** What a dial hears while under way: a tunnel here (or a reason to look everywhere again), or another replica's announcement. */
export type Wake = { local: true } | { local: false; candidate: Candidate };

/** Where a dial's next pass looks: here, then the replicas announced, then those Redis lists if `everywhere`. */
export interface Look {
  everywhere: boolean;
  announced: Candidate[];
}

/**
 * What one dial heard since its last pass. A dial hears from its start to its end, not only while
 * it waits: a wake that comes while a pass is under way (its lookup in flight, even after
 * something else woke it) is kept for the next pass instead of falling between two waits.
 */
export class Heard {
  #everywhere = false;
  readonly #announced = new Map<string, Candidate>();

  get empty(): boolean {
    return !this.#everywhere && this.#announced.size === 0;
  }

  add(wake: Wake): void {
    if (wake.local) this.#everywhere = true;
    else this.#announced.set(wake.candidate.replicaId, wake.candidate);
  }

  /** What was heard, forgotten here. */
  take(): Look {
    const look = { everywhere: this.#everywhere, announced: [...this.#announced.values()] };
    this.#everywhere = false;
    this.#announced.clear();
    return look;
  }
}

/** `first`, then those of `more` from other replicas. */
export function unite(first: Candidate[], more: Candidate[]): Candidate[] {
  const ids = new Set(first.map((c) => c.replicaId));
  return [...first, ...more.filter((c) => !ids.has(c.replicaId))];
}
