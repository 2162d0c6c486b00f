// Usage metrics' kas half, as GitLab's kas's usage_metrics module: the counts the other modules
// register (`KasModuleDeps.usage`) go to GitLab's `usage_metrics` endpoint every
// observability.usage_reporting_period (0: never), and once more when kas stops. Without GitLab
// (no gitlab.address) nothing is sent. It runs with the core: up before the capabilities and fronts
// that count, down after them, so the last report holds their last counts.
import { Counter, type Registry } from "prom-client";
import { postUsageMetrics } from "../../../tool/gitlab/index.ts";
import { type KasModuleFactory, Phase, UsageTracker } from "../../runtime/index.ts";
import { UsageReporter } from "./reporter.ts";

export interface UsageMetricsConfig {
  /** observability.usage_reporting_period; 0 turns reporting off. */
  periodMs: number;
  /** Ids a unique counter keeps at most while GitLab cannot be reached. Default 10 000. */
  maxUniqueIds?: number;
}

/** GitLab's kas gives its last report 5 s. */
const FINAL_REPORT_MS = 5000;
/** The last report gets at least this, even when the shutdown grace is spent (the runner allows overrun). */
const MIN_FINAL_REPORT_MS = 1000;

/**
 * The tracker every module counts into (kas's composition gives it to them as `deps.usage`) and
 * the module that reports it. `registry`: where its metrics go.
 */
export function usageMetricsKas(
  config: UsageMetricsConfig,
  registry: Registry,
): { tracker: UsageTracker; module: KasModuleFactory } {
  const reports = new Counter({
    name: "kas_usage_metrics_reports_total",
    help: "Usage metrics reports to GitLab, by result (accepted; failed: kept for the next report; refused: GitLab's 400, dropped; nothing: nothing to report, not sent).",
    labelNames: ["result"],
    registers: [registry],
  });
  const dropped = new Counter({
    name: "kas_usage_metrics_dropped_ids_total",
    help: "Ids left out of a unique usage counter because it held its maximum while GitLab did not take the reports, by counter.",
    labelNames: ["counter"],
    registers: [registry],
  });
  const tracker = new UsageTracker({
    ...(config.maxUniqueIds !== undefined && { maxUniqueIds: config.maxUniqueIds }),
    onDropped: (name) => dropped.inc({ counter: name }),
  });
  const module: KasModuleFactory = {
    name: "usage_metrics",
    phase: Phase.core,
    create({ log, gitlab }) {
      if (config.periodMs === 0 || gitlab === undefined) {
        log.debug(
          { periodMs: config.periodMs, gitlab: gitlab !== undefined },
          "usage metrics are not sent to GitLab",
        );
        return { name: "usage_metrics" };
      }
      const reporter = new UsageReporter({
        source: tracker,
        send: (data, signal) => postUsageMetrics(gitlab, data, signal),
        periodMs: config.periodMs,
        reports,
        log,
      });
      return {
        name: "usage_metrics",
        start() {
          reporter.start();
        },
        close(graceMs) {
          return reporter.stop(Math.min(FINAL_REPORT_MS, Math.max(MIN_FINAL_REPORT_MS, graceMs)));
        },
      };
    },
  };
  return { tracker, module };
}
