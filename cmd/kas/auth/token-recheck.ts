import { setMaxListeners } from "node:events";
import { type AgentToken, tokenDigest } from "../../../tool/agent-token.ts";
import { AgentAuthError, type AgentAuthErrorCode } from "./errors.ts";
import type { AgentAuthenticator } from "./types.ts";

/** Below this, a re-check interval (the cache TTL; 0 turns caching off) would poll GitLab in a tight loop. */
export const MIN_RECHECK_INTERVAL_MS = 1000;

export interface TokenRecheckOptions {
  /** Asked again for each watched token; normally the cached chain, whose entries expire after `intervalMs`. */
  authenticator: AgentAuthenticator;
  /**
   * How long an answer holds (agent.info_cache_ttl). Each re-check comes up to 10 % later than this,
   * so that agents that connected together do not hit GitLab together forever after. Raised to
   * {@link MIN_RECHECK_INTERVAL_MS}.
   */
  intervalMs: number;
  /** Told every re-check's outcome, for metrics ("ok" or the error code). */
  onResult?: (result: "ok" | AgentAuthErrorCode) => void;
  log?: { warn(obj: object, msg: string): void };
}

interface Group {
  token: AgentToken;
  /** What each holder of the token does when it is refused (closes its tunnel). */
  refused: Set<(error: AgentAuthError) => void>;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Re-checks the tokens of connected agents, so that a revoked token does not keep its tunnels
 * until they age out. Holders of the same token share one re-check: one lookup per token per
 * interval, however many tunnels it has. A definitive refusal (401/403/404) is passed to every
 * holder; a failure to get an answer (GitLab down, 5xx) is not a refusal: the tunnels stay and
 * the token is asked about again one interval later.
 */
export class TokenRecheck {
  readonly #authenticator: AgentAuthenticator;
  readonly #intervalMs: number;
  readonly #onResult: TokenRecheckOptions["onResult"];
  readonly #log: TokenRecheckOptions["log"];
  /** By token digest (never the token itself). */
  readonly #groups = new Map<string, Group>();
  readonly #stopped = new AbortController();

  constructor(options: TokenRecheckOptions) {
    this.#authenticator = options.authenticator;
    this.#intervalMs = Math.max(MIN_RECHECK_INTERVAL_MS, options.intervalMs);
    this.#onResult = options.onResult;
    this.#log = options.log;
    // Every re-check in flight listens on it (thousands of agents): not a leak.
    setMaxListeners(0, this.#stopped.signal);
  }

  /** Tokens being re-checked. */
  get size(): number {
    return this.#groups.size;
  }

  /**
   * Re-checks `token` until the returned function is called (the tunnel closed) or it is refused,
   * in which case `refused` is called once. Call the returned function in every case; it is idempotent.
   */
  watch(token: AgentToken, refused: (error: AgentAuthError) => void): () => void {
    if (this.#stopped.signal.aborted) return () => {};
    const key = tokenDigest(token.reveal()).toString("base64");
    let group = this.#groups.get(key);
    if (group === undefined) {
      group = { token, refused: new Set(), timer: undefined };
      this.#groups.set(key, group);
      this.#schedule(key, group);
    }
    const holder = (error: AgentAuthError) => refused(error); // a distinct entry even for a shared callback
    group.refused.add(holder);
    const g = group;
    return () => {
      g.refused.delete(holder);
      if (g.refused.size === 0) this.#drop(key, g);
    };
  }

  /** Stops every re-check (kas is stopping). */
  destroy(): void {
    this.#stopped.abort();
    for (const [key, group] of this.#groups) this.#drop(key, group);
  }

  #schedule(key: string, group: Group): void {
    const delay = this.#intervalMs * (1 + Math.random() * 0.1);
    group.timer = setTimeout(() => void this.#check(key, group), delay);
    group.timer.unref();
  }

  async #check(key: string, group: Group): Promise<void> {
    group.timer = undefined;
    let error: AgentAuthError | undefined;
    try {
      await this.#authenticator.authenticateAgent(group.token.reveal(), { signal: this.#stopped.signal });
    } catch (err) {
      error = AgentAuthError.from(err);
    }
    if (this.#groups.get(key) !== group) return; // every holder left, or kas is stopping
    this.#onResult?.(error?.code ?? "ok");
    if (error?.definitive) {
      this.#groups.delete(key);
      for (const refused of [...group.refused]) refused(error); // each closes a tunnel, which unwatches
      return;
    }
    if (error) {
      const cause = error.causeText(group.token.reveal());
      this.#log?.warn(
        {
          tokenFingerprint: group.token.fingerprint,
          reason: error.message,
          ...(cause !== undefined && { cause }),
          tunnels: group.refused.size,
        },
        "agent token: re-check failed; its tunnels stay, asked about again later",
      );
    }
    this.#schedule(key, group);
  }

  #drop(key: string, group: Group): void {
    clearTimeout(group.timer);
    if (this.#groups.get(key) === group) this.#groups.delete(key);
  }
}
