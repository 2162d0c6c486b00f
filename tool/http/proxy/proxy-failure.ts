import { errors as undiciErrors } from "undici";
import { NoTunnelError, PeerRejectedError, RegistryUnavailableError } from "../../../lib/router/index.ts";
import { HeaderError, RejectCode, StreamRejectedError } from "../../../lib/tunnel/index.ts";
import { REASONS } from "../../kubernetes-status.ts";

/**
 * What a front answers when a request could not be carried to the agent: an HTTP status, the
 * Kubernetes `Status.reason` for it, and a message safe to show the caller.
 */
export interface ProxyFailure {
  status: number;
  reason: string;
  message: string;
}

export function failure(status: number, message: string): ProxyFailure {
  return { status, reason: REASONS[status] ?? "Unknown", message };
}

/**
 * Maps why a stream to the agent (or the request over it) failed:
 * - no tunnel before the dial deadline, Redis down, a peer refusing us -> 503;
 * - the agent's refusal: NOT_FOUND -> 404 (e.g. a service that is not allow-listed, with the
 *   agent's reason), PERMISSION_DENIED -> 403, UNAVAILABLE -> 503, DEADLINE_EXCEEDED -> 504;
 * - no answer in time (header verdict, connect, response headers) -> 504;
 * - anything else the agent or the stream did -> 502.
 */
export function describeProxyError(err: unknown, agentId: string): ProxyFailure {
  if (err instanceof NoTunnelError) return failure(503, `agent ${agentId} is not connected (${err.message})`);
  if (err instanceof RegistryUnavailableError) return failure(503, err.message);
  if (err instanceof PeerRejectedError) return failure(503, `cannot reach agent ${agentId}: ${err.message}`);
  if (err instanceof StreamRejectedError) {
    switch (err.code) {
      case RejectCode.REJECT_CODE_NOT_FOUND:
        return failure(404, err.reason);
      case RejectCode.REJECT_CODE_PERMISSION_DENIED:
      case RejectCode.REJECT_CODE_UNAUTHENTICATED:
        return failure(403, err.reason);
      case RejectCode.REJECT_CODE_UNAVAILABLE:
        return failure(503, err.reason);
      case RejectCode.REJECT_CODE_DEADLINE_EXCEEDED:
        return failure(504, err.reason);
      default:
        return failure(502, `agent ${agentId} refused the stream: ${err.reason}`);
    }
  }
  if (err instanceof HeaderError && err.code === "TIMEOUT")
    return failure(504, `agent ${agentId} did not answer in time`);
  if (
    err instanceof undiciErrors.ConnectTimeoutError ||
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError
  ) {
    return failure(504, `agent ${agentId} did not answer in time`);
  }
  const message = err instanceof Error ? err.message : String(err);
  return failure(502, `error talking to agent ${agentId}: ${message}`);
}
