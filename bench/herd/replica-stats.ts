// What the surviving replica itself went through, apart from the probe's view (which also pays
// for this machine's other processes): its event loop's longest delay and its CPU time, per window.
import { EVENT_LOOP_SAMPLING_MS } from "../../tool/observability/metrics.ts";
import { cpuSeconds } from "../scale/proc.ts";

export interface ReplicaWindow {
  /**
   * kas's longest event-loop stall in the window, ms: the longest time between two of the lag
   * sampler's wake-ups (prom-client's monitorEventLoopDelay) less the time between them.
   */
  loopDelayMaxMs: number;
  /** kas's CPU time over the window's wall time: 1 is one core busy throughout. */
  cpuShare: number;
  /** kas's CPU time in the window, seconds. */
  cpuSeconds: number;
  /** Handshakes kas refused at its pending limit in the window: given a place in its schedule, or a flat 1 s. */
  refused: { scheduled: number; flat: number };
  /** The rate kas's handshake pacer measured at the window's end, per second (0: not yet measured). */
  capacityPerSecond: number;
  /** kas's garbage collections in the window (Node's GC performance entries, by kind). */
  gc: GcWindow;
}

/** Pauses of one kind of collection: how many, their total, and those of 100 ms or more. */
export interface GcPauses {
  count: number;
  seconds: number;
  over100ms: number;
}

/** `major`: mark-compact; `minor`: scavenges; `incremental`: incremental marking steps; `weakcb`: weak callbacks. */
export type GcWindow = Record<"major" | "minor" | "incremental" | "weakcb", GcPauses>;

const GC_KINDS = ["major", "minor", "incremental", "weakcb"] as const;

/**
 * Reads `kas_nodejs_eventloop_lag_max_seconds` from kas's /metrics; each read also resets kas's
 * delay histogram (prom-client does on every scrape), so successive reads bound windows.
 */
export class ReplicaStats {
  #cpu: number;
  #at: number;
  #refused = { scheduled: 0, flat: 0 };
  #gc: GcWindow = gcTotals("");

  private constructor(
    readonly metricsUrl: string,
    readonly pid: number,
  ) {
    this.#cpu = cpuSeconds(pid);
    this.#at = performance.now();
  }

  /** Starts the first window now. */
  static async start(metricsUrl: string, pid: number): Promise<ReplicaStats> {
    const stats = new ReplicaStats(metricsUrl, pid);
    await stats.window();
    return stats;
  }

  /** Ends the current window and starts the next one. */
  async window(): Promise<ReplicaWindow> {
    const text = await (await fetch(this.metricsUrl, { signal: AbortSignal.timeout(10_000) })).text();
    const cpu = cpuSeconds(this.pid);
    const at = performance.now();
    const m = /^kas_nodejs_eventloop_lag_max_seconds(?:\{[^}]*\})? (\S+)$/m.exec(text);
    if (!m) throw new Error(`no kas_nodejs_eventloop_lag_max_seconds at ${this.metricsUrl}`);
    const refused = { scheduled: refusals(text, "scheduled"), flat: refusals(text, "flat") };
    const result = {
      loopDelayMaxMs: Math.max(0, Number(m[1]) * 1000 - EVENT_LOOP_SAMPLING_MS),
      cpuShare: (cpu - this.#cpu) / ((at - this.#at) / 1000),
      cpuSeconds: cpu - this.#cpu,
      refused: {
        scheduled: refused.scheduled - this.#refused.scheduled,
        flat: refused.flat - this.#refused.flat,
      },
      capacityPerSecond: Number(
        /^kas_agent_handshake_capacity_per_second (\S+)$/m.exec(text)?.[1] ?? Number.NaN,
      ),
    };
    const gc = gcTotals(text);
    const window = { ...result, gc: gcBetween(this.#gc, gc) };
    this.#cpu = cpu;
    this.#at = at;
    this.#refused = refused;
    this.#gc = gc;
    return window;
  }
}

/** kas's count of handshakes refused at its pending limit so far, by `retry`. */
function refusals(text: string, retry: "scheduled" | "flat"): number {
  const m = new RegExp(
    `^kas_agent_handshake_pending_limit_refusals_total\\{retry="${retry}"\\} (\\S+)$`,
    "m",
  ).exec(text);
  if (!m)
    throw new Error(`no kas_agent_handshake_pending_limit_refusals_total{retry="${retry}"} in kas's metrics`);
  return Number(m[1]);
}

/**
 * kas's GC pauses so far, from prom-client's `kas_nodejs_gc_duration_seconds` histogram (its
 * buckets end 0.01, 0.1, 1 s: "100 ms or more" is the count less the 0.1 bucket). Zero where absent.
 */
function gcTotals(text: string): GcWindow {
  const read = (series: string) =>
    Number(new RegExp(`^kas_nodejs_gc_duration_seconds_${series} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  return Object.fromEntries(
    GC_KINDS.map((kind) => {
      const count = read(`count\\{kind="${kind}"\\}`);
      const seconds = read(`sum\\{kind="${kind}"\\}`);
      return [kind, { count, seconds, over100ms: count - read(`bucket\\{le="0\\.1",kind="${kind}"\\}`) }];
    }),
  ) as GcWindow;
}

function gcBetween(a: GcWindow, b: GcWindow): GcWindow {
  return Object.fromEntries(
    GC_KINDS.map((k) => [
      k,
      {
        count: b[k].count - a[k].count,
        seconds: b[k].seconds - a[k].seconds,
        over100ms: b[k].over100ms - a[k].over100ms,
      },
    ]),
  ) as GcWindow;
}
