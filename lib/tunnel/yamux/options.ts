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
  /** Ping interval for keepalive and RTT; 0 disables. Default 30 s. */
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
}

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
  };
  const positive = [
    "maxFrameSize",
    "maxStreams",
    "acceptBacklog",
    "writeBufferSize",
    "maxWriteSize",
  ] as const;
  for (const k of positive) {
    if (!Number.isInteger(o[k]) || o[k] <= 0) throw new RangeError(`yamux: ${k} must be a positive integer`);
  }
  if (o.maxStreamWindow < INITIAL_WINDOW || o.maxStreamWindow > 0xffffffff) {
    throw new RangeError(`yamux: maxStreamWindow must be between ${INITIAL_WINDOW} and 2^32-1`);
  }
  return o;
}
