import { INITIAL_WINDOW } from "./frame.ts";

export interface SessionOptions {
  /** Client sessions use odd stream ids, servers even ones. */
  client: boolean;
  /** Receive window grows (auto-tuning) up to this size per stream. Default 16 MiB. */
  maxStreamWindow?: number;
  /** Largest Data frame this side sends. Default 64 KiB. */
  maxFrameSize?: number;
  /** Concurrent streams, both directions; beyond it new inbound streams are reset. Default 4096. */
  maxStreams?: number;
  /** Inbound streams waiting for accept() when nobody listens for "stream". Default 256. */
  acceptBacklog?: number;
  /**
   * Ping interval for keepalive and RTT; 0 disables keepalive (one ping still samples the RTT for
   * window auto-tuning once a stream's receive window fills). Default 30 s.
   */
  keepAliveIntervalMs?: number;
  /** A ping unanswered this long declares the peer dead and closes the session. Default 30 s. */
  keepAliveTimeoutMs?: number;
  /** An opened stream unacknowledged this long is reset. Default 75 s, as the reference. */
  streamOpenTimeoutMs?: number;
  /** Outgoing bytes queued while the connection is congested before writers wait. Default 1 MiB. */
  writeBufferSize?: number;
  /** A single write to the connection coalesces frames up to this size. Default 1 MiB. */
  maxWriteSize?: number;
  /** After close, how long the connection may take to flush before it is destroyed. Default 5 s. */
  closeTimeoutMs?: number;
  /**
   * Control frames (window updates, pings and their answers, SYN/ACK/RST) waiting for a congested
   * connection. A peer that keeps provoking them without reading them would otherwise grow the
   * queue without end; beyond this the session ends with GoAway(internal error). Answers to the
   * peer's pings never count for more than one (only the newest is kept while congested).
   * Default 4 per stream at `maxStreams`, at least 1024.
   */
  maxControlQueue?: number;
  /**
   * A connection that takes none of our queued bytes for this long (the peer stopped reading, or
   * the path is dead) closes the session, whatever the peer sends meanwhile; 0 disables. Progress
   * is a drained write of up to `maxWriteSize`: keep this well above the time the slowest link
   * needs for one (1 MiB in 30 s is 35 KB/s). Default 30 s (hashicorp/yamux: 10 s per frame).
   */
  connectionWriteTimeoutMs?: number;
  /**
   * A stream we closed (FIN sent) whose peer does not close its side within this time is reset, so
   * a peer cannot hold streams half-open forever. 0 disables. Default 5 min, as the reference.
   */
  streamCloseTimeoutMs?: number;
}

/** The longest delay setTimeout honours. */
const MAX_TIMER_MS = 0x7fffffff;

export type ResolvedOptions = Required<SessionOptions>;

export function resolveOptions(opts: SessionOptions): ResolvedOptions {
  const o: ResolvedOptions = {
    client: opts.client,
    maxStreamWindow: opts.maxStreamWindow ?? 16 * 1024 * 1024,
    maxFrameSize: opts.maxFrameSize ?? 64 * 1024,
    maxStreams: opts.maxStreams ?? 4096,
    acceptBacklog: opts.acceptBacklog ?? 256,
    keepAliveIntervalMs: opts.keepAliveIntervalMs ?? 30_000,
    keepAliveTimeoutMs: opts.keepAliveTimeoutMs ?? 30_000,
    streamOpenTimeoutMs: opts.streamOpenTimeoutMs ?? 75_000,
    writeBufferSize: opts.writeBufferSize ?? 1024 * 1024,
    maxWriteSize: opts.maxWriteSize ?? 1024 * 1024,
    closeTimeoutMs: opts.closeTimeoutMs ?? 5_000,
    maxControlQueue: opts.maxControlQueue ?? Math.max(1024, 4 * (opts.maxStreams ?? 4096)),
    connectionWriteTimeoutMs: opts.connectionWriteTimeoutMs ?? 30_000,
    streamCloseTimeoutMs: opts.streamCloseTimeoutMs ?? 5 * 60_000,
  };
  const positive = [
    "maxFrameSize",
    "maxStreams",
    "acceptBacklog",
    "writeBufferSize",
    "maxWriteSize",
    "maxControlQueue",
  ] as const;
  for (const k of positive) {
    if (!Number.isInteger(o[k]) || o[k] <= 0) throw new RangeError(`yamux: ${k} must be a positive integer`);
  }
  const durations = [
    "keepAliveIntervalMs",
    "keepAliveTimeoutMs",
    "streamOpenTimeoutMs",
    "closeTimeoutMs",
    "connectionWriteTimeoutMs",
    "streamCloseTimeoutMs",
  ] as const;
  for (const k of durations) {
    // setTimeout turns anything beyond 2^31-1 ms into 1 ms: a typo would fire at once.
    if (!(o[k] >= 0 && o[k] <= MAX_TIMER_MS))
      throw new RangeError(`yamux: ${k} must be between 0 and ${MAX_TIMER_MS}`);
  }
  if (o.maxStreamWindow < INITIAL_WINDOW || o.maxStreamWindow > 0xffffffff) {
    throw new RangeError(`yamux: maxStreamWindow must be between ${INITIAL_WINDOW} and 2^32-1`);
  }
  return o;
}
