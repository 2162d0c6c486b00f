import type { TransportConnection } from "./connection.ts";
import type { HandshakeRequest } from "./handshake-request.ts";

export interface DialOptions {
  /** Extra request headers, e.g. `{ Authorization: "Bearer ..." }`. */
  headers?: Readonly<Record<string, string>>;
  /** Subprotocol to request; the server must select exactly this one. Default {@link TUNNEL_SUBPROTOCOL}. */
  subprotocol?: string;
  /**
   * Dial with RFC 8441 (WebSocket over an HTTP/2 extended CONNECT stream): over TLS with ALPN `h2`
   * for `wss://`, HTTP/2 with prior knowledge (h2c) for `ws://`. Default false (HTTP/1.1 Upgrade).
   */
  http2?: boolean;
  /** Extra trusted CA certificate(s), PEM; added to the system roots. */
  ca?: string | Buffer | ReadonlyArray<string | Buffer>;
  /** Path of a PEM file with extra trusted CA certificate(s); added to the system roots. */
  caFile?: string;
  /** Name sent as SNI and checked against the server certificate instead of the URL's host. */
  serverName?: string;
  /** Accept any server certificate. For development only: it disables server authentication. */
  insecureSkipTlsVerify?: boolean;
  /**
   * HTTP CONNECT proxy: a URL (`http://` or `https://`) to always use, `false` to never use one.
   * Default: `HTTPS_PROXY` (wss) / `HTTP_PROXY` (ws), `ALL_PROXY`, minus `NO_PROXY`; lowercase too.
   */
  proxy?: string | URL | false;
  /** Deadline for connect + proxy + TLS + HTTP handshake. Default 10 s. */
  handshakeTimeoutMs?: number;
  signal?: AbortSignal;
  /** Largest incoming message accepted. Default 8 MiB. */
  maxPayload?: number;
}

export type Authenticate<I> = (request: HandshakeRequest, context: { signal: AbortSignal }) => I | Promise<I>;

export interface RejectedHandshake {
  request: HandshakeRequest;
  status: number;
  message: string;
  /** The exception behind a 500, or the timeout. */
  error?: unknown;
}

/** What an acceptor's handshakes are doing (`TunnelAcceptor.handshakeStats`), for metrics. */
export interface HandshakeStats {
  /** Handshakes in progress (authentication, then the pacer's wait), at most `maxPendingHandshakes`. */
  pending: number;
  /** Of those, authenticated and held back by the pacer until the event loop has room. */
  paced: number;
  /**
   * Refused at the pending limit since the acceptor started, told a place in the pacer's schedule
   * (`Retry-After` with `Tunnel-Retry-Scheduled: 1`).
   */
  refusedScheduled: number;
  /**
   * Refused at the pending limit with a flat `Retry-After: 1`: without pacing, or with nothing for
   * the pacer to go on (none held back, no rate measured yet).
   */
  refusedFlat: number;
  /**
   * Handshakes per second the pacer measured the loop taking while it held some back. Places are
   * given out at 1.5 times this, or the recent rate through the pacer if higher. Undefined without
   * pacing, or until it has been measured.
   */
  pacedCapacityPerSecond: number | undefined;
}

export interface AcceptorOptions<I> {
  /** Called with every accepted connection, synchronously on open, before any message is read. */
  onConnection: (connection: TransportConnection<I>) => void;
  /**
   * Runs before the upgrade completes. Its value becomes `connection.identity`; throwing a
   * {@link HandshakeRejection} refuses with that status and message, anything else with 500.
   * The signal fires when the handshake times out or the client goes away.
   */
  authenticate?: Authenticate<I>;
  /** Observability: every refused handshake (never contains header values). */
  onReject?: (rejected: RejectedHandshake) => void;
  /** Request path served (query string ignored). Default "/". */
  path?: string;
  /** Subprotocol required from clients. Default {@link TUNNEL_SUBPROTOCOL}. */
  subprotocol?: string;
  /** Largest incoming message accepted; bigger ones close the connection with 1009. Default 8 MiB. */
  maxPayload?: number;
  /** Handshakes (authentication included) in progress at once; beyond it: 503. Default 128. */
  maxPendingHandshakes?: number;
  /** Deadline from request to completed upgrade; past it: 503 and the hook's signal aborts. Default 10 s. */
  handshakeTimeoutMs?: number;
  /**
   * Paces authenticated handshakes by the event loop's load, so that arrivals in bulk (a replica's
   * worth of agents reconnecting at once) do not stall the tunnels already open: a handshake
   * completes while the loop was busy less than this share of the last few milliseconds, and
   * waits otherwise (within its deadline), one at least every 50 ms. Handshakes refused meanwhile
   * for `maxPendingHandshakes` are told (`Retry-After`) when the queue ahead of them will have gone
   * through at the rate the loop has been able to take them, up to 30 s, instead of 1 s. That queue is shared fairly among client addresses (the
   * connection's peer; IPv6 by /64): refused before authentication, a flood from one address
   * pushes back only its own places. What a connection then says in its first 10 s (the first
   * messages of what its peer opens) is paced too: such input runs for about 10 ms at a time (in
   * a turn of the event loop's poll phase, again in its check phase), the rest waits for later
   * turns (its WebSocket paused), connections in the order they began to wait, so the tunnels
   * already open are served in between. In (0, 1]; default 1, no pacing.
   */
  maxLoopUtilization?: number;
}

export function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0)
    throw new RangeError(`${name} must be a positive number, got ${value}`);
  return value;
}
