/** Errors carry a Node-style `code` so callers can branch without parsing messages. */
export class YamuxError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "YamuxError";
    this.code = code;
  }
}

/** The peer broke the protocol; the session answers with GoAway(protocol error) and closes. */
export class ProtocolError extends YamuxError {
  constructor(message: string) {
    super("ERR_YAMUX_PROTOCOL", `yamux protocol error: ${message}`);
    this.name = "ProtocolError";
  }
}

export const errors = {
  sessionClosed: (cause?: Error) =>
    new YamuxError("ERR_YAMUX_SESSION_CLOSED", "yamux session closed", cause ? { cause } : undefined),
  remoteGoAway: () => new YamuxError("ERR_YAMUX_REMOTE_GOAWAY", "peer sent GoAway: no new streams"),
  tooManyStreams: (max: number) =>
    new YamuxError("ERR_YAMUX_TOO_MANY_STREAMS", `too many concurrent streams (max ${max})`),
  idsExhausted: () => new YamuxError("ERR_YAMUX_IDS_EXHAUSTED", "stream ids exhausted"),
  peerFailed: (code: number) => {
    const why = code === 1 ? "a protocol error" : code === 2 ? "an internal error" : `unknown code ${code}`;
    return new YamuxError("ERR_YAMUX_PEER_GOAWAY", `peer ended the session with GoAway: ${why}`);
  },
  reset: () => new YamuxError("ECONNRESET", "stream reset by peer"),
  refused: () => new YamuxError("ECONNREFUSED", "stream refused by peer"),
  openTimeout: (ms: number) => new YamuxError("ETIMEDOUT", `stream not acknowledged within ${ms} ms`),
  pingTimeout: (ms: number) => new YamuxError("ETIMEDOUT", `peer did not answer a ping within ${ms} ms`),
  /** The peer made us queue more control frames than the bound while it read none of them. */
  controlQueueFull: (max: number) =>
    new YamuxError(
      "ERR_YAMUX_CONTROL_QUEUE_FULL",
      `more than ${max} control frames queued behind a connection the peer does not read`,
    ),
  /** The connection took none of our bytes for too long: the peer stopped reading, or the path is dead. */
  writeTimeout: (ms: number) =>
    new YamuxError("ERR_YAMUX_WRITE_TIMEOUT", `connection made no write progress for ${ms} ms`),
  /** We closed our side of a stream and the peer never closed its own. */
  closeTimeout: (ms: number) =>
    new YamuxError("ETIMEDOUT", `peer did not close its side of the stream within ${ms} ms of ours`),
};
