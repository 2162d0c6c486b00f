import { EventEmitter, once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { dial } from "../transport/client.ts";
import type { DialOptions } from "../transport/options.ts";
import type { YamuxStream } from "../yamux/index.ts";
import { Backoff, type BackoffOptions } from "./backoff.ts";
import { type TunnelOptions, TunnelSession } from "./tunnel-session.ts";

export interface TunnelClientOptions {
  /** ws:// or wss:// address of the tunnel server. */
  url: string | URL;
  /** Transport settings: headers (credentials), CA, proxy, handshake timeout… `signal` is the client's own. */
  dial?: Omit<DialOptions, "signal">;
  /** Multiplexer settings. */
  tunnel?: TunnelOptions;
  backoff?: BackoffOptions;
  /** Serves streams the server opens; without it such streams are refused. */
  onStream?: (stream: YamuxStream, session: TunnelSession) => void;
}

export interface TunnelClientEvents {
  /** A new tunnel is up and is now the one new streams use. */
  connected: [session: TunnelSession];
  /** A tunnel ended (abnormally when `err` is set). */
  disconnected: [session: TunnelSession, err?: Error];
  /** A dial failed; the next attempt comes after `delayMs`. Rejected credentials come here too. */
  retry: [info: { attempt: number; delayMs: number; error: Error }];
}

/**
 * Keeps one tunnel up. Failed dials back off exponentially with jitter. When the server sends
 * GoAway (it is draining), the replacement is dialed first and the old tunnel finishes its
 * streams before it closes (make-before-break), so a server drain loses nothing.
 */
export class TunnelClient extends EventEmitter<TunnelClientEvents> {
  readonly #opts: TunnelClientOptions;
  readonly #backoff: Backoff;
  readonly #stop = new AbortController();
  readonly #sessions = new Set<TunnelSession>();
  #active: TunnelSession | undefined;
  #running: Promise<void> | undefined;

  constructor(opts: TunnelClientOptions) {
    super();
    this.#opts = opts;
    this.#backoff = new Backoff(opts.backoff);
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
  async stop(graceMs = 10_000): Promise<void> {
    this.#stop.abort();
    await this.#running;
    await Promise.all([...this.#sessions].map((s) => s.drain(graceMs)));
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
        const delayMs = this.#backoff.next();
        this.emit("retry", { attempt: this.#backoff.attempt, delayMs, error: err as Error });
        await sleep(delayMs, undefined, { signal: stopped }).catch(() => {});
        continue;
      }
      this.#backoff.reset();
      const ended = this.#adopt(session);
      const why = await ended;
      if (why === "closed" && !stopped.aborted) {
        // Even a tunnel that drops right after connecting costs a backoff delay: no tight loop.
        await sleep(this.#backoff.next(), undefined, { signal: stopped }).catch(() => {});
      }
      // On "goaway" loop straight on: the replacement is dialed while the old one drains.
    }
  }

  /** Makes `session` the active tunnel; resolves when it stops being so. */
  #adopt(session: TunnelSession): Promise<"goaway" | "closed"> {
    this.#sessions.add(session);
    const onStream = this.#opts.onStream;
    session.on("stream", (s) => {
      if (onStream) onStream(s, session);
      else s.destroy();
    });
    this.#active = session;
    this.emit("connected", session);
    const stop = this.#stop.signal;
    return new Promise((resolve) => {
      const retire = (why: "goaway" | "closed") => {
        stop.removeEventListener("abort", onStop);
        if (this.#active === session) this.#active = undefined;
        resolve(why);
      };
      const onStop = () => retire("closed");
      stop.addEventListener("abort", onStop, { once: true });
      session.once("goaway", () => {
        retire("goaway");
        void session.drain(); // its streams finish; the server closes it if they never do
      });
      session.once("close", (err) => {
        this.#sessions.delete(session);
        retire("closed");
        this.emit("disconnected", session, err);
      });
    });
  }
}
