// Which tunnel a stream runs over, as far as its users need to know: whether that tunnel is going
// away. A pool that keeps connections (streams) alive for reuse asks this, so it stops handing
// requests to a stream its tunnel's grace period is about to cut.
import type { Duplex } from "node:stream";

const signals = new WeakMap<Duplex, AbortSignal>();

/** Records that `stream` runs over a tunnel whose draining (GoAway either way, or close) aborts `signal`. */
export function bindDraining(stream: Duplex, signal: AbortSignal): void {
  signals.set(stream, signal);
}

/**
 * Aborts once the tunnel `stream` runs over drains or closes; undefined for a stream not opened
 * by a TunnelSession (or not known to run over one). A stream forwarded across replicas reports
 * the tunnel of its first hop.
 */
export function drainingSignalOf(stream: Duplex): AbortSignal | undefined {
  return signals.get(stream);
}
