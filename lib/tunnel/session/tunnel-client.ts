import { EventEmitter, once } from "node:events";
import { dial } from "../transport/client.ts";
import type { DialOptions } from "../transport/options.ts";
import type { YamuxStream } from "../yamux/index.ts";
import { Backoff, type BackoffOptions } from "./backoff.ts";
import { DEFAULT_GRACE_MS } from "./grace.ts";
import { retryAfterMs, retryScheduled } from "./retry-after.ts";
import { type TunnelOptions, TunnelSession } from "./tunnel-session.ts";

export interface TunnelClientOptions {
  /** ws:// or wss:// address of the tunnel server. */
  url: string | URL;
  /** Transport settings: headers (credentials), CA, proxy, handshake timeout… `signal` is the client's own. */
  dial?: Omit<DialOptions, "signal">;
  /** Multiplexer settings. */
  tunnel?: TunnelOptions;
  backoff?: BackoffOptions;
  /**
   * A tunnel is stable once it has been up this long and the server has sent something on it (a
   * keepalive answer will do). Only then is the backoff reset, and only a stable tunnel's GoAway is
   * answered by dialing at once: a server that accepts and then sheds every tunnel (GoAway or close)
   * is redialed after growing delays, not in a loop. Default 30 s.
   */
  stableAfterMs?: number;
  /** Serves streams the server opens; without it such streams are refused. */
  onStream?: (stream: YamuxStream, session: TunnelSession) => void;
}

/** Why the client waits before its next dial, and for how long. */
export interface RetryInfo {
  /** Steps of the backoff since the last stable tunnel, this wait's included (a `scheduled` wait takes none). */
  attempt: number;
  delayMs: number;
  /**
   * "dial": the dial failed (rejected credentials included). "goaway": the server sent GoAway before
   * the tunnel was stable. "closed": the tunnel closed.
   */
  reason: "dial" | "goaway" | "closed";
  /** The dial's failure, or how long the tunnel lasted and why it closed. */
  error: Error;
  /**
   * What the server asked for with a refused handshake's `Retry-After` (a 429 past a limit, a 503
   * when busy), capped at 10 min: `delayMs` is at least this.
   */
  retryAfterMs?: number;
  /** True when `retryAfterMs` was a place in a paced server's schedule, kept to without stepping the backoff. */
  scheduled?: boolean;
}

export interface TunnelClientEvents {
  /** A new tunnel is up and is now the one new streams use. */
  connected: [session: TunnelSession];
  /** The active tunnel has proved itself (see `stableAfterMs`); the backoff starts over. */
  stable: [session: TunnelSession];
  /** A tunnel ended (abnormally when `err` is set). */
  disconnected: [session: TunnelSession, err?: Error];
  /** The next dial comes after `delayMs`. */
  retry: [info: RetryInfo];
}

/** How a tunnel stopped being the active one. */
interface TunnelEnd {
  reason: "goaway" | "closed";
  stable: boolean;
  error: Error;
}

/**
 * Keeps one tunnel up. Failed dials, and tunnels that end before they are stable, back off
 * exponentially with jitter; a refused handshake's Retry-After is a floor for the next wait, or,
 * marked as a place in a paced server's schedule, the wait itself (docs/tunnel-protocol.md, 6.4).
 * When the server sends GoAway on a stable tunnel (it is draining), the replacement is dialed at
 * once and the old tunnel finishes its streams before it closes (make-before-break), so a server
 * drain loses nothing.
 */
export class TunnelClient extends EventEmitter<TunnelClientEvents> {
  readonly #opts: TunnelClientOptions;
  readonly #backoff: Backoff;
  readonly #stableAfterMs: number;
  readonly #stop = new AbortController();
  readonly #sessions = new Set<TunnelSession>();
  #active: TunnelSession | undefined;
  #running: Promise<void> | undefined;

  constructor(opts: TunnelClientOptions) {
    super();
    this.#opts = opts;
    this.#backoff = new Backoff(opts.backoff);
    this.#stableAfterMs = opts.stableAfterMs ?? 30_000;
    if (!(this.#stableAfterMs >= 0)) throw new RangeError("tunnel client: stableAfterMs must be >= 0");
  }

  /** The tunnel new streams go to, if one is up. */
  get active(): TunnelSession | undefined {
    return this.#active;
  }

  /** Every tunnel still open, the draining ones included. */
  get sessions(): ReadonlySet<TunnelSession> {
    return this.#sessions;
  }

  start(): this {
    this.#running ??= this.#run();
    return this;
  }

  /** Resolves with the active tunnel, waiting for one up to `timeoutMs`. */
  async ready(timeoutMs = 30_000, signal?: AbortSignal): Promise<TunnelSession> {
    if (this.#active) return this.#active;
    const signals = [AbortSignal.timeout(timeoutMs), this.#stop.signal, ...(signal ? [signal] : [])];
    try {
      const [session] = await once(this, "connected", { signal: AbortSignal.any(signals) });
      return session as TunnelSession;
    } catch (err) {
      if (this.#stop.signal.aborted) throw new Error("tunnel client stopped");
      if (signal?.aborted) throw signal.reason;
      throw new Error(`no tunnel to ${String(this.#opts.url)} within ${timeoutMs} ms`, { cause: err });
    }
  }

  /** Opens a stream on the active tunnel, waiting for one if needed. */
  async open(timeoutMs?: number, signal?: AbortSignal): Promise<YamuxStream> {
    return (await this.ready(timeoutMs, signal)).open();
  }

  /**
   * Stops reconnecting; every tunnel gets GoAway and `graceMs` to finish its streams, then closes.
   */
  async close(graceMs = DEFAULT_GRACE_MS): Promise<void> {
    this.#stop.abort();
    await this.#running;
    await Promise.all([...this.#sessions].map((s) => s.close(graceMs)));
  }

  async #run(): Promise<void> {
    const stopped = this.#stop.signal;
    while (!stopped.aborted) {
      let session: TunnelSession;
      try {
        const transport = await dial(this.#opts.url, { ...this.#opts.dial, signal: stopped });
        session = new TunnelSession(transport, "client", this.#opts.tunnel);
      } catch (err) {
        if (stopped.aborted) return;
        await this.#wait("dial", err as Error);
        continue;
      }
      const end = await this.#adopt(session);
      if (stopped.aborted) return;
      // A stable tunnel's GoAway is a drain: dial the replacement now while the old one finishes.
      // Any other end costs the next delay, so a server shedding every tunnel sees no tight loop.
      if (end.reason === "goaway" && end.stable) continue;
      await this.#wait(end.reason, end.error);
    }
  }

  async #wait(reason: RetryInfo["reason"], error: Error): Promise<void> {
    const asked = retryAfterMs(error);
    // A place in a paced server's schedule beyond the backoff's next step is kept to without
    // stepping the backoff, so a client refused on the way to its turn is not held back by a
    // backoff grown meanwhile; any other Retry-After (a proxy's, a limit's) is only a floor.
    const scheduled = asked !== undefined && retryScheduled(error) && asked > this.#backoff.upcoming;
    const backoffMs = scheduled ? 0 : this.#backoff.next();
    // Never before the server said, and spread after it: many agents refused in the same second
    // (a limit's minute ending, a replica's restart) must not all come back in the same second.
    const delayMs =
      asked === undefined ? backoffMs : Math.max(backoffMs, Math.round(asked * (1 + 0.2 * Math.random())));
    const info: RetryInfo = { attempt: this.#backoff.attempt, delayMs, reason, error };
    if (asked !== undefined) info.retryAfterMs = asked;
    if (scheduled) info.scheduled = true;
    this.emit("retry", info);
    await pause(delayMs, this.#stop.signal);
  }

  /** Makes `session` the active tunnel; resolves when it stops being so. */
  #adopt(session: TunnelSession): Promise<TunnelEnd> {
    this.#sessions.add(session);
    const onStream = this.#opts.onStream;
    session.on("stream", (s) => {
      if (onStream) onStream(s, session);
      else s.destroy();
    });
    this.#active = session;
    this.emit("connected", session);
    let stable = false;
    // Time alone proves little (a silent peer, a black hole until keepalive gives up): wait for
    // the server to have said something, checking again every `stableAfterMs` until it has.
    const probe = setTimeout(() => {
      if (session.stats.bytesIn === 0) return probe.refresh();
      stable = true;
      this.#backoff.reset();
      this.emit("stable", session);
    }, this.#stableAfterMs);
    probe.unref();
    const stop = this.#stop.signal;
    return new Promise((resolve) => {
      const retire = (reason: TunnelEnd["reason"], cause?: Error) => {
        clearTimeout(probe);
        stop.removeEventListener("abort", onStop);
        if (this.#active === session) this.#active = undefined;
        const lasted = `${Date.now() - session.stats.connectedAt.getTime()} ms after it came up`;
        const what = reason === "goaway" ? `server sent GoAway ${lasted}` : `tunnel closed ${lasted}`;
        const error = cause ? new Error(`${what}: ${cause.message}`, { cause }) : new Error(what);
        resolve({ reason, stable, error });
      };
      const onStop = () => retire("closed");
      stop.addEventListener("abort", onStop, { once: true });
      session.once("goaway", () => {
        retire("goaway");
        void session.close(); // its streams finish; the server closes it if they never do
      });
      session.once("close", (err) => {
        this.#sessions.delete(session);
        retire("closed", err);
        this.emit("disconnected", session, err);
      });
    });
  }
}

/** Resolves after `ms`, or as soon as `signal` aborts. On the global timers, which tests can fake. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    if (signal.aborted) done();
  });
}
