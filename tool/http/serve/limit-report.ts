// How a listener tells of the connections it closed for a limit: a counter an operator can alert
// on, and log lines that a flood of connections cannot turn into a flood of lines.

export interface LimitLog {
  debug(obj: object, msg: string): void;
  warn?(obj: object, msg: string): void;
}

/** Told of each connection closed for a limit: "max connections", "header or body deadline", … */
export type LimitReport = (limit: string) => void;

/** Where closes are counted (`RequestMetrics`: `<prefix>_connections_closed_for_limit_total`). */
export interface LimitCounter {
  connectionClosed(front: string, limit: string): void;
}

/**
 * A front's {@link LimitReport}: each close counted in `counter`, and as log lines a debug line
 * per connection closed for a deadline, and for connections refused at the cap a warning, at most
 * a minute apart, with how many were (a flood of connections must not become a flood of log lines).
 */
export function limitReporter(front: string, log: LimitLog | undefined, counter?: LimitCounter): LimitReport {
  let refused = 0;
  let lastWarning = 0;
  return (limit) => {
    counter?.connectionClosed(front, limit);
    if (limit !== "max connections") {
      log?.debug({ front, limit }, "connection closed for a limit");
      return;
    }
    refused++;
    const now = Date.now();
    if (now - lastWarning < 60_000) return;
    lastWarning = now;
    log?.warn?.({ front, limit, refused }, "connections refused: at the cap");
    refused = 0;
  };
}
