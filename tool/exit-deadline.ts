import type { Logger } from "./observability/logger.ts";

/** How long past its grace period a daemon's shutdown may run before it exits anyway. */
export const SHUTDOWN_OVERRUN_MS = 10_000;
/** How long a daemon that has shut down may take to end by itself (its last writes, sockets closing). */
export const LINGER_MS = 2_000;

/**
 * A daemon's last guard on its way out. Its shutdown is bounded piece by piece and the process
 * ends by itself once everything is closed; should it not (a close that never settles, a handle
 * left open), it must not live on serving nothing: that hangs a terminal's Ctrl-C and spends the
 * orchestrator's whole termination grace. `ms` from now, if the process is still running, this
 * logs `reason` with what is still open (Node's resource kinds, counted), flushes and exits with
 * `code`. The timer is unref'd: a process that ends sooner is not held. Returns a cancel.
 */
export function exitIfStillRunning(
  ms: number,
  { log, code, reason }: { log: Logger; code: number; reason: string },
): () => void {
  const timer = setTimeout(() => {
    log.error({ open: openResources(), exitCode: code }, `${reason}; exiting`);
    flushAndExit(log, code);
  }, ms);
  timer.unref();
  return () => clearTimeout(timer);
}

/** What keeps the event loop alive, counted by kind: `{ TCPSocketWrap: 2, Timeout: 1 }`. */
function openResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

/** Flushes the logs, then exits with `code`; after `flushTimeoutMs` it exits anyway (a flush that never completes must not hold the exit). */
export function flushAndExit(log: Logger, code: number, flushTimeoutMs = 1000): void {
  const exit = () => process.exit(code);
  setTimeout(exit, flushTimeoutMs).unref();
  log.flush(exit);
}
