/** The WebSocket subprotocol both ends must agree on; a peer offering anything else is refused. */
export const TUNNEL_SUBPROTOCOL = "gitlab-agent-tunnel.v1";

export const DEFAULT_PATH = "/";

/** Largest WebSocket message accepted. yamux coalesces frames into messages of up to ~1 MiB. */
export const DEFAULT_MAX_PAYLOAD = 8 * 1024 * 1024;

export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

export const DEFAULT_MAX_PENDING_HANDSHAKES = 128;

/**
 * Sent with the `Retry-After` of a paced acceptor's 503: the wait is this client's place in the
 * acceptor's schedule (the herd spread over the time the acceptor can take it in), to be kept to
 * without growing the client's backoff. Any other `Retry-After` is only a floor under the backoff.
 */
export const RETRY_SCHEDULED_HEADER = "tunnel-retry-scheduled";

/**
 * HTTP/2 receive window (per stream and per connection) for the sessions this module creates.
 * The default 64 KiB would cap one tunnel at 64 KiB per round trip; 1 MiB allows ~20 MB/s at
 * 50 ms RTT while bounding what a stalled reader buffers.
 */
export const H2_WINDOW_SIZE = 1024 * 1024;

/** How much of a refused handshake's response body is kept for the error message. */
export const MAX_ERROR_BODY_BYTES = 4096;

/** WebSocket close codes used by the transport (RFC 6455 section 7.4.1). */
export const CloseCode = {
  normal: 1000,
  goingAway: 1001,
  unsupportedData: 1003,
  noStatus: 1005,
  abnormal: 1006,
  messageTooBig: 1009,
} as const;
