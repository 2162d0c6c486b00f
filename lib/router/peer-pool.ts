import type { Duplex } from "node:stream";
import { type TunnelOptions, TunnelSession } from "../tunnel/session/index.ts";
import { type DialOptions, dial, HandshakeError } from "../tunnel/transport/index.ts";
import { PeerRejectedError } from "./errors.ts";

export interface PeerPoolOptions {
  /** A fresh bearer token for each dial. */
  token: () => Promise<string>;
  /** Transport settings for peer dials (CA, server name, handshake timeout…). */
  dial?: Omit<DialOptions, "headers" | "signal">;
  tunnel?: TunnelOptions;
}

/**
 * One tunnel per peer replica, shared by every stream forwarded there. A closed or draining
 * tunnel is replaced by a fresh dial on next use; concurrent first uses share one dial.
 */
export class PeerPool {
  readonly #opts: PeerPoolOptions;
  readonly #sessions = new Map<string, Entry>();
  #closed = false;

  constructor(options: PeerPoolOptions) {
    this.#opts = options;
  }

  /** Number of peers with a tunnel up or being dialed. */
  get size(): number {
    return this.#sessions.size;
  }

  /**
   * A raw stream to the peer at `url`. Rejects with PeerRejectedError when the peer refuses
   * the credentials, or the transport's error when it cannot be reached.
   */
  async open(url: string, signal?: AbortSignal): Promise<Duplex> {
    for (let attempt = 0; ; attempt++) {
      const session = await race(this.#session(url), signal);
      if (!session.closed && !session.draining) {
        try {
          return await session.open();
        } catch (err) {
          if (attempt > 0) throw err; // a fresh tunnel that cannot open a stream: give up
        }
      }
      this.#forget(url, session);
    }
  }

  destroy(): void {
    this.#closed = true;
    for (const { pending } of this.#sessions.values())
      pending.then(
        (s) => s.destroy(),
        () => {},
      );
    this.#sessions.clear();
  }

  #session(url: string): Promise<TunnelSession> {
    if (this.#closed) return Promise.reject(new Error("peer pool closed"));
    const existing = this.#sessions.get(url);
    if (existing) return existing.pending;
    const entry: Entry = { pending: this.#dial(url) };
    this.#sessions.set(url, entry);
    entry.pending.then(
      (s) => {
        entry.session = s;
        s.once("close", () => this.#forget(url, s));
      },
      () => {
        if (this.#sessions.get(url) === entry) this.#sessions.delete(url);
      },
    );
    return entry.pending;
  }

  async #dial(url: string): Promise<TunnelSession> {
    const headers = { Authorization: `Bearer ${await this.#opts.token()}` };
    try {
      const transport = await dial(url, { ...this.#opts.dial, headers });
      const session = new TunnelSession(transport, "client", this.#opts.tunnel);
      if (this.#closed) session.destroy();
      return session;
    } catch (err) {
      if (err instanceof HandshakeError && (err.status === 401 || err.status === 403)) {
        throw new PeerRejectedError(url, err.status, { cause: err });
      }
      throw err;
    }
  }

  #forget(url: string, session: TunnelSession): void {
    const entry = this.#sessions.get(url);
    if (entry?.session === session) this.#sessions.delete(url);
    // The old tunnel finishes its streams; it takes no new ones either way.
    if (!session.closed && session.draining) void session.close();
  }
}

interface Entry {
  pending: Promise<TunnelSession>;
  /** Set once the dial succeeded. */
  session?: TunnelSession;
}

/** The caller's abort ends its wait, not the shared dial. */
function race<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
