import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import { openWithHeader, type StreamHeaderInit, StreamRejectedError } from "../tunnel/header/index.ts";
import type { TunnelOptions, TunnelServer } from "../tunnel/session/index.ts";
import { DEFAULT_GRACE_MS } from "../tunnel/session/index.ts";
import type { DialOptions, ListenOptions } from "../tunnel/transport/index.ts";
import { NoTunnelError, PeerRejectedError } from "./errors.ts";
import { Heard, type Look, unite, type Wake } from "./heard.ts";
import { openLocal } from "./local-open.ts";
import { LocalRegistry, type Tunnel } from "./local-registry.ts";
import { PeerAuth, type PeerAuthOptions } from "./peer-auth.ts";
import { PeerPool } from "./peer-pool.ts";
import { isNoTunnel, type PeerIdentity, type PeerListenLimits, servePeers } from "./peer-server.ts";
import { createRedisClients, type RedisConnectionOptions } from "./redis-options.ts";
import { RedisRegistry, type RedisRegistryOptions } from "./redis-registry.ts";
import { Waiters } from "./waiters.ts";

export const DEFAULT_DIAL_TIMEOUT_MS = 10_000;

export interface RouterOptions {
  /** Unique per replica. Default: a random UUID. */
  replicaId?: string;
  /** The private API other replicas forward streams to. Required with `redis`. */
  privateApi?: {
    host?: string;
    /** Default 0 (ephemeral). kas uses 8155. */
    port?: number;
    tls?: ListenOptions<PeerIdentity>["tls"];
    /** The URL peers dial, when the bound address is not it (a pod IP, a service name). */
    advertiseUrl?: string;
    /** JWT settings; `secret` is the shared key (see `readSecretFile`). */
    auth: PeerAuthOptions;
    /** Transport settings for dialing peers (CA, server name, handshake timeout…). */
    dial?: Omit<DialOptions, "headers" | "signal">;
    tunnel?: TunnelOptions;
    /** The private API's handshake deadline, connection cap, HTTP/2 streams per connection, and who hears of closes for them. */
    limits?: PeerListenLimits;
  };
  /**
   * Where the replicas register their agents. Without it the router is single-replica: local
   * tunnels only, no private API, and `dial` waits for a local tunnel until the deadline.
   */
  redis?: RedisConnectionOptions &
    Pick<
      RedisRegistryOptions,
      "keyPrefix" | "livenessTtlMs" | "livenessRefreshMs" | "agentTtlMs" | "agentRefreshMs"
    >;
  /** Redis failures, for logs (routing carries on; lookups fail fast while Redis is down). */
  onError?: (err: Error) => void;
  /** Used when `dial` is given no deadline. Default 10 s. */
  defaultTimeoutMs?: number;
}

export interface DialRouteOptions {
  signal?: AbortSignal;
  /** Epoch ms (or a Date) by which a stream must be open. Default: now + `defaultTimeoutMs`. */
  deadline?: number | Date;
}

/**
 * Finds the tunnel to an agent wherever it is: on this replica, on another one (found through
 * Redis, reached over the private API), or soon (waiting for either until the deadline).
 */
export class Router {
  readonly replicaId: string;
  readonly local = new LocalRegistry();
  readonly #opts: RouterOptions;
  readonly #auth: PeerAuth | undefined;
  readonly #waiters = new Waiters<void>();
  /** Per agent, what each dial under way has heard. */
  readonly #dials = new Map<string, Set<Heard>>();
  #closed = false;
  #pool: PeerPool | undefined;
  #server: TunnelServer<PeerIdentity> | undefined;
  #cluster: RedisRegistry | undefined;
  #started = false;

  constructor(options: RouterOptions) {
    if (options.redis && !options.privateApi) throw new TypeError("router: redis needs privateApi");
    this.#opts = options;
    this.replicaId = options.replicaId ?? randomUUID();
    this.#auth = options.redis && options.privateApi ? new PeerAuth(options.privateApi.auth) : undefined;
  }

  /** False in single-replica mode (no `redis`): no private API, local tunnels only. */
  get clustered(): boolean {
    return this.#auth !== undefined;
  }

  /** The private API's URL, as peers dial it. */
  get privateUrl(): string {
    if (!this.#server) throw new Error(this.clustered ? "router not started" : "router is single-replica");
    return this.#opts.privateApi?.advertiseUrl ?? this.#server.url;
  }

  /** Peer replicas this one has a private tunnel to (or is dialing). */
  get peerTunnels(): number {
    return this.#pool?.size ?? 0;
  }

  /** The cluster registry (for health checks and metrics). */
  get cluster(): RedisRegistry {
    const { cluster } = this.#parts();
    if (!cluster) throw new Error("router is single-replica: no cluster registry");
    return cluster;
  }

  /** Starts the private API and connects to Redis (not waiting for Redis to be up). */
  async start(): Promise<this> {
    const api = this.#opts.privateApi;
    const { redis } = this.#opts;
    const auth = this.#auth;
    if (!redis || !api || !auth) {
      this.local.on("available", (agentId) => this.#wake(agentId, { local: true }));
      this.#started = true;
      return this;
    }
    this.#server = await servePeers({
      host: api.host,
      port: api.port,
      tls: api.tls,
      tunnel: api.tunnel,
      ...(api.limits && { limits: api.limits }),
      auth,
      local: this.local,
      replicaId: this.replicaId,
    });
    this.#pool = new PeerPool({
      token: () => auth.sign(this.replicaId),
      dial: api.dial,
      tunnel: api.tunnel,
    });
    const { commands, subscriber } = await createRedisClients(redis).catch(async (err) => {
      await this.#server?.close(0); // e.g. an unreadable password file: do not leave the port open
      throw err;
    });
    const cluster = new RedisRegistry({
      ...redis,
      commands,
      subscriber,
      replicaId: this.replicaId,
      url: this.privateUrl,
    });
    this.#cluster = cluster;
    cluster.on("error", (err) => this.#opts.onError?.(err));
    cluster.on("announce", (agentId, candidate) => this.#wake(agentId, { local: false, candidate }));
    // Back from an outage: a replica that republished before this one listened again was not
    // heard, so every dial under way looks again instead of waiting out its deadline.
    cluster.on("listening", () => {
      for (const agentId of this.#dials.keys()) this.#wake(agentId, { local: true });
    });
    this.local.on("available", (agentId) => {
      cluster.hold(agentId);
      this.#wake(agentId, { local: true });
    });
    this.local.on("unavailable", (agentId) => cluster.release(agentId));
    for (const agentId of this.local.agentIds()) cluster.hold(agentId); // registered before start
    this.#started = true;
    await cluster.start();
    return this;
  }

  /** Routes streams for `agentId` over `tunnel` until it closes. Returns an unregister function. */
  register(agentId: string, tunnel: Tunnel): () => void {
    return this.local.register(agentId, tunnel);
  }

  /**
   * Opens a stream to the agent with `header` (its agentId set to `agentId`), accepted by the
   * agent; the Duplex is positioned at the start of the agent's payload. Rejects with
   * NoTunnelError (deadline), RegistryUnavailableError (not local, Redis down),
   * PeerRejectedError (a replica refused our credentials), the agent's StreamRejectedError,
   * the signal's reason, or `Error("router closed")` once `close` was called (whatever the
   * close cut under the dial is its `cause`).
   */
  async dial(agentId: string, header: StreamHeaderInit, options: DialRouteOptions = {}): Promise<Duplex> {
    this.#parts();
    const { signal } = options;
    const start = Date.now();
    const deadline =
      options.deadline === undefined
        ? start + (this.#opts.defaultTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS)
        : Number(options.deadline);
    const routed = { ...header, agentId };
    const noTunnel = (cause?: unknown) => new NoTunnelError(agentId, Date.now() - start, { cause });
    if (this.#closed) throw new Error("router closed");
    // Listen before looking, and until the end: a tunnel that turns up while a pass is under way
    // (its lookup in flight, even after something else woke the dial) is kept for the next pass.
    const heard = new Heard();
    const dials = this.#dials.get(agentId) ?? new Set<Heard>();
    this.#dials.set(agentId, dials.add(heard));
    try {
      let look: Look = { everywhere: true, announced: [] };
      for (;;) {
        signal?.throwIfAborted();
        const stream = await this.#attempt(agentId, routed, look, deadline, signal).catch((err: unknown) => {
          // The close cut the lookup or the peer tunnel under it: say why, as a waiting dial does.
          if (this.#closed && !signal?.aborted) throw new Error("router closed", { cause: err });
          throw err;
        });
        if (stream) return stream;
        if (this.#closed) throw new Error("router closed"); // it was looking, not waiting, when close failed the waiters
        // Checked and armed in one go: a wake from now on both lands in `heard` and ends the wait.
        // Past the deadline the wait fails at once, whatever was heard.
        if (heard.empty || Date.now() >= deadline)
          await this.#waiters.wait(agentId, { deadline, signal }, noTunnel);
        look = heard.take();
      }
    } finally {
      dials.delete(heard);
      if (dials.size === 0 && this.#dials.get(agentId) === dials) this.#dials.delete(agentId);
    }
  }

  /** Tells the dials under way for `agentId` what turned up, and wakes those waiting. */
  #wake(agentId: string, wake: Wake): void {
    for (const heard of this.#dials.get(agentId) ?? []) heard.add(wake);
    this.#waiters.notify(agentId, undefined);
  }

  /**
   * One pass: a local tunnel, else each candidate replica (those announced, then, when looking
   * everywhere, those Redis lists). Resolves `undefined` when nobody could take the stream yet.
   */
  async #attempt(
    agentId: string,
    header: StreamHeaderInit,
    look: Look,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<Duplex | undefined> {
    const { cluster, pool } = this.#parts();
    const timeoutMs = () => Math.max(1, deadline - Date.now());
    const local = await openLocal(this.local, agentId, header, { signal, timeoutMs: timeoutMs() });
    if (local) return local;
    if (!cluster || !pool) return undefined; // single replica: wait for a local tunnel
    const candidates = look.everywhere
      ? unite(look.announced, await cluster.lookup(agentId))
      : look.announced;
    let refused: PeerRejectedError | undefined;
    let answered = false;
    for (const c of candidates) {
      try {
        const open = (s: AbortSignal) => pool.open(c.url, s);
        return await openWithHeader(open, header, { signal, timeoutMs: timeoutMs() });
      } catch (err) {
        if (signal?.aborted) throw err;
        if (err instanceof StreamRejectedError && !isNoTunnel(err)) throw err; // the agent's verdict
        if (err instanceof PeerRejectedError) refused = err;
        else answered = true;
      }
    }
    // Replicas that hold the agent refuse our credentials and none said otherwise: waiting
    // would only turn a configuration error into a timeout.
    if (refused && !answered) throw refused;
    return undefined;
  }

  /** An `open(signal)` for the gRPC / HTTP adapters: every stream they open goes to `agentId`. */
  opener(
    agentId: string,
    header: StreamHeaderInit,
    timeoutMs?: number,
  ): (signal: AbortSignal) => Promise<Duplex> {
    return (signal) => {
      const deadline = Date.now() + (timeoutMs ?? this.#opts.defaultTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS);
      return this.dial(agentId, header, { signal, deadline });
    };
  }

  /**
   * The first step of a graceful shutdown, while this replica still serves what is in flight: the
   * private API takes no new peer connections and its tunnels get GoAway, so peers stop sending
   * new streams here (their kept-alive ones close once idle) while the ones under way carry on.
   * Dialing from here keeps working until `close`.
   */
  drain(): void {
    this.#server?.listener.server.close();
    for (const session of this.#server?.sessions ?? []) session.goAway();
  }

  /**
   * Graceful shutdown: withdraw this replica from Redis, stop the private API (forwarded streams
   * get `graceMs` to finish), drop peer tunnels. Dials still waiting fail: call it once nothing
   * of this replica's own needs the router any more (after `drain` and the fronts' close). `unpublish: false` leaves the Redis entries to
   * expire, as a crash would, and `graceMs: 0` cuts everything at once.
   */
  async close(graceMs = DEFAULT_GRACE_MS, options: { unpublish?: boolean } = {}): Promise<void> {
    this.#closed = true;
    this.#waiters.rejectAll(new Error("router closed"));
    await this.#cluster?.close({ unpublish: options.unpublish ?? true });
    this.#pool?.destroy();
    if (graceMs === 0) {
      this.#server?.listener.server.close();
      for (const s of this.#server?.sessions ?? []) s.destroy();
      await this.#server?.listener.close(0);
    } else {
      await this.#server?.close(graceMs);
    }
  }

  /** The clustered parts; all undefined in single-replica mode. Throws before `start`. */
  #parts(): { pool: PeerPool | undefined; cluster: RedisRegistry | undefined } {
    if (!this.#started) throw new Error("router not started");
    return { pool: this.#pool, cluster: this.#cluster };
  }
}
