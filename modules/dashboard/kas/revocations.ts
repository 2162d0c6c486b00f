// Dashboard sessions that logged out before their cookie expired. A session cookie is a signed JWT
// that any replica accepts on its own, so logging out has to leave a record that outlives the
// cookie in the browser: the session's id, kept until the cookie would have expired anyway.
// This file holds the record of one process; `redis-revocations.ts` shares it between replicas.

/** What a revocation needs to know of a session (from its JWT: `jti`, `iat`, `exp`). */
export interface SessionRecord {
  id: string;
  issuedAtMs: number;
  expiresAtMs: number;
}

export interface SessionRevocations {
  /** Records that `session` is over; rejects when that could not be recorded where it must hold. */
  revoke(session: SessionRecord): Promise<void>;
  /** Whether `session` was revoked; rejects when that cannot be told. */
  isRevoked(session: SessionRecord): Promise<boolean>;
  /** Told the id of each session revoked (with Redis: on any replica); returns a function that stops it. */
  onRevoked(listener: (id: string) => void): () => void;
}

/** Revoked sessions one process remembers at most (default); past it, see `MemoryRevocations`. */
export const MAX_REVOKED_SESSIONS = 10_000;

/**
 * The record in this process's memory, at most `max` sessions. Expired sessions are forgotten
 * first; should the record still be full, the older half is forgotten and every session issued
 * no later than the newest of them is refused from then on (`issuedFloorMs`): a bound that logs
 * some users out early, never one that lets a logged-out cookie back in.
 */
export class MemoryRevocations implements SessionRevocations {
  readonly #revoked = new Map<string, SessionRecord>();
  readonly #listeners = new Set<(id: string) => void>();
  #issuedFloorMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly max = MAX_REVOKED_SESSIONS,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(max) || max < 2)
      throw new Error(`max must be an integer of at least 2, got ${max}`);
  }

  /** Sessions remembered one by one (for tests and metrics). */
  get size(): number {
    return this.#revoked.size;
  }

  async revoke(session: SessionRecord): Promise<void> {
    this.record(session);
  }

  /** `revoke`, synchronously: for a revocation heard from another replica. */
  record(session: SessionRecord): void {
    if (session.expiresAtMs <= this.now() || this.#revoked.has(session.id)) return;
    if (this.#revoked.size >= this.max) this.#makeRoom();
    this.#revoked.set(session.id, session);
    for (const listener of this.#listeners) listener(session.id);
  }

  async isRevoked(session: SessionRecord): Promise<boolean> {
    return this.has(session);
  }

  /** `isRevoked`, synchronously. */
  has(session: SessionRecord): boolean {
    return session.issuedAtMs <= this.#issuedFloorMs || this.#revoked.has(session.id);
  }

  onRevoked(listener: (id: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #makeRoom(): void {
    const now = this.now();
    for (const [id, session] of this.#revoked) if (session.expiresAtMs <= now) this.#revoked.delete(id);
    if (this.#revoked.size < this.max) return;
    const byAge = [...this.#revoked.values()].sort((a, b) => a.issuedAtMs - b.issuedAtMs);
    const forgotten = byAge.slice(0, byAge.length >> 1);
    for (const session of forgotten) this.#revoked.delete(session.id);
    this.#issuedFloorMs = Math.max(this.#issuedFloorMs, forgotten.at(-1)!.issuedAtMs);
  }
}
