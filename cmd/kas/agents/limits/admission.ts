import { type Authenticate, HandshakeRejection } from "../../../../lib/tunnel/index.ts";
import type { AgentIdentity, AgentSession, KasRedis } from "../../../../modules/runtime/index.ts";
import { tokenFingerprint } from "../../../../tool/agent-token.ts";
import { bearerToken } from "../../auth/handshake.ts";
import { ConnectionRate } from "./rate.ts";
import { type TunnelSlot, TunnelSlots } from "./slots.ts";
import { type TokenKeyer, tokenKeyer } from "./token-key.ts";

/** Why a handshake was refused: the setting whose limit it met (the metric's `reason` label). */
export type TunnelLimitReason = "connections_per_token_per_minute" | "max_tunnels_per_token";

export interface TunnelLimits {
  /** Handshakes per agent token per UTC minute, valid or not (agent.listen.connections_per_token_per_minute). */
  connectionsPerTokenPerMinute: number;
  /** Tunnels open at once per agent token, every replica together (agent.listen.max_tunnels_per_token). */
  maxTunnelsPerToken: number;
}

export interface TunnelAdmissionOptions {
  limits: TunnelLimits;
  /** Counts across replicas; without it, in this process. */
  redis?: KasRedis;
  /** Keys the token hashes; the same on every replica (see `tokenKeyer`). */
  secret?: Uint8Array;
  onRefused?: (reason: TunnelLimitReason) => void;
  /** Redis could not count for `limit`: this process's count decided. */
  onFallback?: (limit: TunnelLimitReason, err: Error) => void;
  log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/**
 * What a tunnel full of slots would leave to wait for: one of the token's tunnels to close, which
 * an agent cannot see. Long enough that a misconfigured fleet is not a storm of refusals, short
 * enough that an agent gets its tunnel soon after one is free.
 */
const FULL_RETRY_AFTER_S = 30;
/** Refusals logged: at most one per token, limit and minute, and this many tokens a minute. */
const MAX_LOGGED = 1000;

/**
 * The agent listener's limits per token: connection attempts per minute (checked before
 * authentication, so a flood with one token never reaches GitLab) and tunnels open at once
 * (a slot taken once authenticated, held until the tunnel closes). Past either: HTTP 429 with
 * Retry-After, before the upgrade, with the setting's name in the message.
 */
export class TunnelAdmission {
  readonly #limits: TunnelLimits;
  readonly #rate: ConnectionRate;
  readonly #slots: TunnelSlots;
  readonly #key: TokenKeyer;
  readonly #onRefused: ((reason: TunnelLimitReason) => void) | undefined;
  readonly #log: TunnelAdmissionOptions["log"];
  /** Slots taken for identities whose tunnel is not up yet. */
  readonly #pending = new WeakMap<AgentIdentity, TunnelSlot>();
  readonly #logged = new Map<string, number>();

  constructor(o: TunnelAdmissionOptions) {
    this.#limits = o.limits;
    this.#key = tokenKeyer(o.secret);
    this.#onRefused = o.onRefused;
    this.#log = o.log;
    this.#rate = new ConnectionRate({
      limitPerMinute: o.limits.connectionsPerTokenPerMinute,
      ...(o.redis && { redis: o.redis }),
      onFallback: (err) => o.onFallback?.("connections_per_token_per_minute", err),
    });
    this.#slots = new TunnelSlots({
      limit: o.limits.maxTunnelsPerToken,
      ...(o.redis && { redis: o.redis }),
      onFallback: (err) => o.onFallback?.("max_tunnels_per_token", err),
    });
    this.#slots.start();
  }

  /** `authenticate` with the limits around it. */
  wrap(authenticate: Authenticate<AgentIdentity>): Authenticate<AgentIdentity> {
    return async (request, context) => {
      const token = bearerToken(request.headers.authorization);
      if (token === undefined) return authenticate(request, context); // refused there, 401
      const key = this.#key(token);
      const rate = await this.#rate.take(key);
      if (!rate.allowed) {
        const limit = this.#limits.connectionsPerTokenPerMinute;
        throw this.#refuse(
          "connections_per_token_per_minute",
          token,
          request.remoteAddress,
          `too many connection attempts with this agent token: limit ${limit} per minute (agent.listen.connections_per_token_per_minute)`,
          rate.retryAfterS,
        );
      }
      const identity = await authenticate(request, context);
      const { slot } = await this.#slots.reserve(key);
      if (slot === undefined) {
        const limit = this.#limits.maxTunnelsPerToken;
        throw this.#refuse(
          "max_tunnels_per_token",
          token,
          request.remoteAddress,
          `too many tunnels open with this agent token: limit ${limit} (agent.listen.max_tunnels_per_token)`,
          FULL_RETRY_AFTER_S,
        );
      }
      // The handshake timed out or the agent left while the slot was taken: nobody will claim it.
      if (context.signal.aborted) {
        slot.release();
        throw context.signal.reason;
      }
      this.#pending.set(identity, slot);
      return identity;
    };
  }

  /** The tunnel of an identity `wrap` admitted is up: its slot is held until it closes. */
  adopt(session: AgentSession): void {
    const slot = this.#pending.get(session.identity);
    if (slot === undefined) return;
    this.#pending.delete(session.identity);
    slot.claim();
    // `on`: a session closes once, and release is idempotent (`once` would add a wrapper per tunnel).
    session.on("close", () => slot.release());
  }

  close(): void {
    this.#slots.close();
  }

  #refuse(
    reason: TunnelLimitReason,
    token: string,
    remoteAddress: string | undefined,
    message: string,
    retryAfterS: number,
  ): HandshakeRejection {
    this.#onRefused?.(reason);
    const fingerprint = tokenFingerprint(token);
    // A token past its limit keeps knocking: one line per token, limit and minute says it all.
    const minute = Math.floor(Date.now() / 60_000);
    const seen = `${reason}\u0000${fingerprint}`;
    if (this.#logged.get(seen) !== minute) {
      for (const [k, m] of this.#logged) if (m !== minute) this.#logged.delete(k);
      if (this.#logged.size < MAX_LOGGED) {
        this.#logged.set(seen, minute);
        this.#log?.warn(
          { tokenFingerprint: fingerprint, reason, remoteAddress },
          "agent tunnel refused: limit reached",
        );
      }
    }
    return new HandshakeRejection(429, `${message}; retry after ${retryAfterS} s`, {
      "retry-after": String(retryAfterS),
    });
  }
}
