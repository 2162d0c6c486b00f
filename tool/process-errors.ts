import { flushAndExit } from "./exit-deadline.ts";
import type { Logger } from "./observability/logger.ts";

export interface ProcessErrorPolicyOptions {
  /** How long flushing the logs may take before the process exits anyway. Default 2 s. */
  flushTimeoutMs?: number;
}

/**
 * What a daemon does with an error nobody caught; both daemons install it as soon as their
 * logger exists (before that, Node's defaults apply: a stack trace on stderr and exit 1).
 * - A promise rejected with nobody to handle it: logged at error level, and the daemon runs on.
 *   Such an error ends one operation (a request, a stream) whose code has already moved on;
 *   Node's default (exit) would let one bad request cut every agent's tunnel.
 * - An exception nobody caught: logged at fatal level, logs flushed, exit 1. It unwound an
 *   arbitrary callback, maybe halfway through an update, so the state is unknown: a restart
 *   (the orchestrator's) is the safe way on.
 */
export function installProcessErrorPolicy(log: Logger, options: ProcessErrorPolicyOptions = {}): void {
  const flushTimeoutMs = options.flushTimeoutMs ?? 2000;
  let exiting = false;
  process.on("unhandledRejection", (reason) => {
    log.error({ err: reason }, "unhandled promise rejection (a bug: the daemon carries on)");
  });
  process.on("uncaughtException", (err, origin) => {
    log.fatal({ err, origin }, "uncaught exception: exiting, the daemon's state is unknown");
    if (exiting) return;
    exiting = true;
    flushAndExit(log, 1, flushTimeoutMs);
  });
}
