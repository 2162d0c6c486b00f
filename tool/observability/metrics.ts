import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { TunnelSession } from "../../lib/tunnel/index.ts";

/**
 * How often the event-loop-lag sampler wakes the process, even when idle: prom-client's 10 ms
 * default alone costs an idle daemon about 1 % of a core, 100 ms costs a tenth. Each sample is the
 * time between two wake-ups, so `*_eventloop_lag_min_seconds` is about this and the loop's
 * longest stall is `*_eventloop_lag_max_seconds` less this.
 */
export const EVENT_LOOP_SAMPLING_MS = 100;

/** A registry with Node's process metrics (CPU, memory, event loop lag, handles) under `prefix`. */
export function createRegistry(prefix: string): Registry {
  const registry = new Registry();
  collectDefaultMetrics({
    register: registry,
    prefix: `${prefix}_`,
    eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLING_MS,
  });
  return registry;
}

/**
 * Tunnel metrics read from live sessions at scrape time (nothing to update on the data path):
 * tunnels, connected agents, open streams, and bytes in/out (totals survive closed tunnels).
 */
export class TunnelMetrics {
  readonly #live = new Map<TunnelSession<unknown>, string>();
  #closedBytesIn = 0;
  #closedBytesOut = 0;
  /** The live tunnels' sums, taken once per scrape (three metrics read them). */
  #sums: { openStreams: number; bytesIn: number; bytesOut: number } | undefined;

  /** `countAgents`: also export `<prefix>_connected_agents` (kas; agentk holds tunnels of one agent). Default true. */
  constructor(registry: Registry, prefix: string, options: { countAgents?: boolean } = {}) {
    const live = this.#live;
    new Gauge({
      name: `${prefix}_tunnels`,
      help: "Tunnels (WebSocket + yamux sessions) currently up.",
      registers: [registry],
      collect() {
        this.set(live.size);
      },
    });
    if (options.countAgents ?? true) {
      new Gauge({
        name: `${prefix}_connected_agents`,
        help: "Distinct agents with at least one tunnel up.",
        registers: [registry],
        collect() {
          this.set(new Set(live.values()).size);
        },
      });
    }
    const sums = () => this.#liveSums();
    new Gauge({
      name: `${prefix}_tunnel_open_streams`,
      help: "Streams open across all tunnels.",
      registers: [registry],
      collect() {
        this.set(sums().openStreams);
      },
    });
    const counter = (name: string, help: string, pick: () => number) =>
      new Counter({
        name,
        help,
        registers: [registry],
        collect() {
          this.reset();
          this.inc(pick());
        },
      });
    counter(
      `${prefix}_tunnel_received_bytes_total`,
      "Bytes received over tunnels (yamux framing included).",
      () => this.#closedBytesIn + sums().bytesIn,
    );
    counter(
      `${prefix}_tunnel_sent_bytes_total`,
      "Bytes sent over tunnels (yamux framing included).",
      () => this.#closedBytesOut + sums().bytesOut,
    );
  }

  /**
   * One pass over the live tunnels for the whole scrape, forgotten on the next turn: with 10,000
   * tunnels each pass reads 10,000 sessions' stats, and the loop waits for the scrape meanwhile.
   */
  #liveSums(): { openStreams: number; bytesIn: number; bytesOut: number } {
    if (this.#sums) return this.#sums;
    const sums = { openStreams: 0, bytesIn: 0, bytesOut: 0 };
    for (const session of this.#live.keys()) {
      const { openStreams, bytesIn, bytesOut } = session.stats;
      sums.openStreams += openStreams;
      sums.bytesIn += bytesIn;
      sums.bytesOut += bytesOut;
    }
    this.#sums = sums;
    setImmediate(() => {
      this.#sums = undefined;
    });
    return sums;
  }

  /** Counts `session` until it closes; `agentId` groups tunnels into agents. */
  track(session: TunnelSession<unknown>, agentId = ""): void {
    if (session.closed || this.#live.has(session)) return;
    this.#live.set(session, agentId);
    session.on("close", () => {
      const { bytesIn, bytesOut } = session.stats;
      this.#closedBytesIn += bytesIn;
      this.#closedBytesOut += bytesOut;
      this.#live.delete(session);
      this.#sums = undefined; // its bytes now count as closed: not twice in a scrape of this turn
    });
  }
}

/**
 * Request durations by route and status, for any HTTP or gRPC front the daemon serves, and the
 * connections its listeners closed for a limit.
 */
export class RequestMetrics {
  readonly #histogram: Histogram<"route" | "status">;
  readonly #limited: Counter<"front" | "limit">;

  constructor(registry: Registry, prefix: string) {
    this.#limited = new Counter({
      name: `${prefix}_connections_closed_for_limit_total`,
      help: "Connections a listener closed for a limit (max connections, a header or body deadline, unauthenticated, no tunnel), by front and limit.",
      labelNames: ["front", "limit"],
      registers: [registry],
    });
    this.#histogram = new Histogram({
      name: `${prefix}_request_duration_seconds`,
      help: "Duration of requests served, by route and status (HTTP status or gRPC code name).",
      labelNames: ["route", "status"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
  }

  /** Starts timing; call the result with the status when the request is done. Routes must be templates, not raw paths. */
  start(route: string): (status: number | string) => void {
    const end = this.#histogram.startTimer({ route });
    return (status) => {
      end({ status: String(status) });
    };
  }

  /** One connection closed by `front` for `limit` (e.g. "max connections"). */
  connectionClosed(front: string, limit: string): void {
    this.#limited.inc({ front, limit });
  }

  observe(route: string, status: number | string, seconds: number): void {
    this.#histogram.observe({ route, status: String(status) }, seconds);
  }
}
