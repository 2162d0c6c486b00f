import { Counter, Gauge, type Registry } from "prom-client";
import type { HandshakeStats } from "../../../lib/tunnel/index.ts";

/**
 * The agent listener's handshakes, read from its acceptor at scrape time: how many are in
 * progress and held back by the pacer, how fast the pacer measured the loop taking them, and the
 * refusals at the pending limit (`scheduled`: given a place, as a reconnecting herd is; `flat`:
 * `Retry-After: 1`, with pacing off or nothing for the pacer to go on yet).
 */
export class HandshakeMetrics {
  #source: (() => HandshakeStats) | undefined;

  constructor(registry: Registry) {
    const read = () => this.#source?.();
    const gauge = (name: string, help: string, pick: (s: HandshakeStats) => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          const stats = read();
          this.set(stats === undefined ? 0 : pick(stats));
        },
      });
    gauge(
      "kas_agent_handshakes_pending",
      "Agent handshakes in progress (authentication, then the pacer's wait).",
      (s) => s.pending,
    );
    gauge(
      "kas_agent_handshakes_paced",
      "Authenticated agent handshakes held back until the event loop has room (agent.listen.handshake_loop_utilization).",
      (s) => s.paced,
    );
    gauge(
      "kas_agent_handshake_capacity_per_second",
      "Handshakes per second the pacer measured the event loop taking while it held some back; refused handshakes are given places at 1.5 times this (or the recent rate, if higher). 0 until measured.",
      (s) => s.pacedCapacityPerSecond ?? 0,
    );
    new Counter({
      name: "kas_agent_handshake_pending_limit_refusals_total",
      help: "Agent handshakes refused (HTTP 503) at the pending limit, by retry: scheduled (a place in the pacer's schedule) or flat (Retry-After: 1).",
      labelNames: ["retry"],
      registers: [registry],
      collect() {
        const stats = read();
        this.reset();
        this.inc({ retry: "scheduled" }, stats?.refusedScheduled ?? 0);
        this.inc({ retry: "flat" }, stats?.refusedFlat ?? 0);
      },
    });
  }

  /** Reads the handshakes from `source` from now on (the agent listener, once it serves). */
  watch(source: () => HandshakeStats): void {
    this.#source = source;
  }
}
