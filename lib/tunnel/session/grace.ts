/**
 * How long work in flight (streams, requests, calls) may go on after a graceful `close()` when the
 * caller names no grace period: the one default of the library. Daemons pass their configured one.
 */
export const DEFAULT_GRACE_MS = 10_000;
