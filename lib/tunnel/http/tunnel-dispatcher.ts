import { Agent } from "undici";
import { type OpenOriginStream, tunnelConnector } from "./connector.ts";
import { StreamSlots } from "./stream-slots.ts";

export interface TunnelDispatcherOptions
  extends Omit<
    Agent.Options,
    "connect" | "connections" | "keepAliveTimeout" | "keepAliveMaxTimeout" | "factory"
  > {
  /** Most streams open at once through this dispatcher (all origins, upgraded ones included). Default 16. */
  maxStreams?: number;
  /** A keep-alive connection idle this long closes its stream. Default 4000 ms. */
  idleTimeoutMs?: number;
  /** Waiting for a slot under the cap plus `open()` must finish within this. Default 10000 ms. */
  connectTimeoutMs?: number;
}

/**
 * An undici Dispatcher whose connections are tunnel streams: `fetch(url, { dispatcher })`,
 * `request`, `stream`, `upgrade` and `connect` all work through it. Each connection is one stream
 * from `open(origin)`, kept alive and reused for later requests to the same origin, and closed
 * after `idleTimeoutMs` of idleness. A server's `Keep-Alive: timeout=` hint can only shorten that.
 */
export class TunnelDispatcher extends Agent {
  readonly #slots: StreamSlots;

  constructor(open: OpenOriginStream, options: TunnelDispatcherOptions = {}) {
    const { maxStreams = 16, idleTimeoutMs = 4_000, connectTimeoutMs = 10_000, ...agentOptions } = options;
    if (!(idleTimeoutMs > 0)) throw new RangeError(`idleTimeoutMs must be positive, got ${idleTimeoutMs}`);
    if (!(connectTimeoutMs > 0))
      throw new RangeError(`connectTimeoutMs must be positive, got ${connectTimeoutMs}`);
    const slots = new StreamSlots(maxStreams);
    super({
      ...agentOptions,
      // Per origin too: a pool reuses its connections instead of queueing new ones on the cap.
      connections: maxStreams,
      keepAliveTimeout: idleTimeoutMs,
      keepAliveMaxTimeout: idleTimeoutMs,
      connect: tunnelConnector(open, slots, connectTimeoutMs),
    });
    this.#slots = slots;
  }

  /** Streams open (or being opened) through this dispatcher right now. */
  get openStreams(): number {
    return this.#slots.used;
  }
}
