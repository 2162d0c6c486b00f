/**
 * Why `Router.dial` failed, coarse enough for a caller to map to a status:
 * - NO_TUNNEL: no replica had a tunnel to the agent before the deadline (gRPC UNAVAILABLE / HTTP 503,
 *   or DEADLINE_EXCEEDED when the caller's own deadline was what ran out).
 * - REGISTRY_UNAVAILABLE: the tunnel is not local and Redis, which says where it is, cannot be asked.
 * - PEER_REJECTED: a kas replica refused this one's credentials (shared secret or clock out of step).
 * A refusal by the agent itself (unknown service, permission denied) is the tunnel library's
 * StreamRejectedError, passed through unchanged.
 */
import { CodedError } from "../tunnel/errors.ts";

export type RouterErrorCode = "NO_TUNNEL" | "REGISTRY_UNAVAILABLE" | "PEER_REJECTED";

export class RouterError extends CodedError<RouterErrorCode> {
  override name = "RouterError";
}

export class NoTunnelError extends RouterError {
  override name = "NoTunnelError";
  readonly agentId: string;

  constructor(agentId: string, waitedMs: number, options?: ErrorOptions) {
    super("NO_TUNNEL", `no tunnel to agent ${agentId} within ${Math.round(waitedMs)} ms`, options);
    this.agentId = agentId;
  }
}

export class RegistryUnavailableError extends RouterError {
  override name = "RegistryUnavailableError";

  constructor(message: string, options?: ErrorOptions) {
    super("REGISTRY_UNAVAILABLE", `tunnel registry unavailable: ${message}`, options);
  }
}

export class PeerRejectedError extends RouterError {
  override name = "PeerRejectedError";
  readonly peerUrl: string;
  /** HTTP status of the refused handshake. */
  readonly status: number;

  constructor(peerUrl: string, status: number, options?: ErrorOptions) {
    super(
      "PEER_REJECTED",
      `kas peer ${peerUrl} refused this replica's credentials (HTTP ${status})`,
      options,
    );
    this.peerUrl = peerUrl;
    this.status = status;
  }
}
