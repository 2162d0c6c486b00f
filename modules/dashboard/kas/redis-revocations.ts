// Revoked dashboard sessions shared by every kas replica through Redis: a key per session that
// expires with the session's cookie (Redis forgets it exactly when the cookie would be refused
// anyway), looked up whenever this replica's own record does not already refuse the session. A
// broadcast tells the other replicas at once, so that they end that session's open event streams
// and remember it without asking Redis again.
import type { Broadcast, KasRedis } from "../../runtime/index.ts";
import { MemoryRevocations, type SessionRecord, type SessionRevocations } from "./revocations.ts";

const CHANNEL = "dashboard_session_revoked";
/** Ids are random UUIDs; anything longer heard on the channel is not one of ours. */
const MAX_ID_LENGTH = 64;

export class RedisRevocations implements SessionRevocations {
  readonly #unsubscribe: () => void;
  /** Whether the current Redis outage was logged: once per outage, not once per request. */
  #failing = false;

  constructor(
    private readonly redis: KasRedis,
    private readonly broadcast: Broadcast,
    private readonly log: { warn(obj: object, msg: string): void },
    private readonly local = new MemoryRevocations(),
  ) {
    this.#unsubscribe = broadcast.subscribe(CHANNEL, (message) => {
      const session = parseRecord(message);
      if (session) this.local.record(session);
      else this.log.warn({ channel: CHANNEL }, "ignored a malformed dashboard session revocation");
    });
  }

  #key(id: string): string {
    return `${this.redis.keyPrefix}dashboard:revoked_session:${id}`;
  }

  async revoke(session: SessionRecord): Promise<void> {
    // Here first, whatever Redis says: this replica refuses the cookie from now on.
    this.local.record(session);
    await this.#redis(() => this.redis.client.set(this.#key(session.id), "1", "PXAT", session.expiresAtMs));
    // Best effort: a replica that misses it still finds the key on the session's next request.
    await this.broadcast.publish(CHANNEL, JSON.stringify(session)).catch(() => {});
  }

  async isRevoked(session: SessionRecord): Promise<boolean> {
    if (this.local.has(session)) return true;
    if ((await this.#redis(() => this.redis.client.exists(this.#key(session.id)))) === 0) return false;
    this.local.record(session);
    return true;
  }

  onRevoked(listener: (id: string) => void): () => void {
    return this.local.onRevoked(listener);
  }

  /** A command whose failure the operator is told of (the user only gets a 503). */
  async #redis<T>(command: () => Promise<T>): Promise<T> {
    try {
      const result = await command();
      this.#failing = false;
      return result;
    } catch (err) {
      if (!this.#failing) {
        this.#failing = true;
        this.log.warn(
          { err: (err as Error).message },
          "cannot reach Redis for dashboard session revocations: sessions get 503 until it is back",
        );
      }
      throw err;
    }
  }

  /** Stops listening to the other replicas. */
  close(): void {
    this.#unsubscribe();
  }
}

function parseRecord(message: string): SessionRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    return undefined;
  }
  const { id, issuedAtMs, expiresAtMs } = (value ?? {}) as Partial<Record<keyof SessionRecord, unknown>>;
  if (typeof id !== "string" || id === "" || id.length > MAX_ID_LENGTH) return undefined;
  if (!Number.isFinite(issuedAtMs) || !Number.isFinite(expiresAtMs)) return undefined;
  return { id, issuedAtMs: issuedAtMs as number, expiresAtMs: expiresAtMs as number };
}
