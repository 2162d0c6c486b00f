// Each period, what the usage counts accumulated goes to GitLab, as GitLab's kas's usage_metrics
// module does: nothing is sent when there is nothing to report; on GitLab's 204 exactly what was
// sent is subtracted (counts made while the POST was on the wire stay); on a failure everything
// stays for the next period. One report at a time. On stop, a last report within a deadline.
import type { Logger } from "../../../tool/observability/index.ts";
import type { UsageData } from "../../runtime/index.ts";

/** Where the counts are (runtime's UsageTracker). */
export interface UsageSource {
  collect(): UsageData | undefined;
  subtract(data: UsageData): void;
}

/**
 * How a report ended: accepted (GitLab's 204, subtracted), failed (kept for the next period),
 * refused (GitLab's 400: it will never take this body; dropped), nothing (nothing to report).
 */
export type ReportResult = "accepted" | "failed" | "refused" | "nothing";

export interface UsageReporterOptions {
  source: UsageSource;
  /** One POST to GitLab (tool/gitlab's postUsageMetrics): resolves on 204, rejects otherwise. */
  send: (data: UsageData, signal: AbortSignal) => Promise<void>;
  periodMs: number;
  /** Periods by result (`nothing`: nothing was sent). */
  reports: { inc(labels: { result: ReportResult }): void };
  log: Logger;
}

export class UsageReporter {
  readonly #o: UsageReporterOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<ReportResult> | undefined;
  #stopped = false;
  /** Aborts a periodic report still on the wire once the stop's deadline passed. */
  readonly #cut = new AbortController();
  /** Failing since the last accepted report: logged once per outage. */
  #failing = false;

  constructor(options: UsageReporterOptions) {
    this.#o = options;
  }

  /** Reports every period until `stop`. */
  start(): void {
    this.#schedule();
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      // Bounded by the client's timeout, not by the period: a POST cut short after GitLab took it
      // would be sent again and counted twice.
      void this.report(this.#cut.signal).finally(() => this.#schedule());
    }, this.#o.periodMs);
    this.#timer.unref();
  }

  /** One report now (after the one under way, if any). */
  report(signal: AbortSignal): Promise<ReportResult> {
    const next = (this.#running ?? Promise.resolve("nothing")).then(() => this.#reportOnce(signal));
    this.#running = next;
    return next;
  }

  async #reportOnce(signal: AbortSignal): Promise<ReportResult> {
    const { log, reports } = this.#o;
    const data = this.#o.source.collect();
    if (data === undefined) {
      reports.inc({ result: "nothing" });
      return "nothing";
    }
    try {
      await this.#o.send(data, signal);
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status === 400) {
        // GitLab's validation refused the body: it would refuse it every period.
        this.#o.source.subtract(data);
        reports.inc({ result: "refused" });
        log.error(
          { err: (err as Error).message, counters: data.counters },
          "GitLab refused kas's usage metrics; dropped",
        );
        return "refused";
      }
      reports.inc({ result: "failed" });
      if (!this.#failing) {
        log.warn(
          { err: (err as Error)?.message ?? String(err) },
          "cannot send usage metrics to GitLab; kept for the next report",
        );
      }
      this.#failing = true;
      return "failed";
    }
    this.#o.source.subtract(data);
    reports.inc({ result: "accepted" });
    if (this.#failing) log.info({}, "usage metrics reach GitLab again");
    this.#failing = false;
    return "accepted";
  }

  /**
   * No more periods; the report under way finishes, then a last one is sent, all within
   * `deadlineMs`. What GitLab did not take by then is lost with the process.
   */
  async stop(deadlineMs: number): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    const deadline = AbortSignal.timeout(deadlineMs);
    deadline.addEventListener("abort", () => this.#cut.abort(deadline.reason), { once: true });
    const result = await this.report(deadline);
    if (result === "failed") this.#o.log.warn({}, "kas stops with usage metrics GitLab did not take");
  }
}
