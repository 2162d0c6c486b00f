import type { IncomingHttpHeaders } from "node:http";
import { CodedError, StatusError } from "../errors.ts";
import { CloseCode } from "./constants.ts";

/**
 * What went wrong, coarse enough for a reconnect policy:
 * - HANDSHAKE_REJECTED: the server answered with an HTTP status instead of upgrading ({@link HandshakeError}).
 * - PROXY_REJECTED: the HTTP proxy refused the CONNECT ({@link HandshakeError} with `via: "proxy"`).
 * - HANDSHAKE_TIMEOUT: no completed handshake within the deadline.
 * - ABORTED: the caller's AbortSignal fired.
 * - NETWORK: DNS, refused, reset, unreachable.
 * - TLS: certificate or TLS negotiation failure.
 * - PROTOCOL: the peer spoke, but not this protocol (bad subprotocol, no RFC 8441, text message, oversize message).
 * - CLOSED: an established connection went away.
 */
export type TransportErrorCode =
  | "HANDSHAKE_REJECTED"
  | "PROXY_REJECTED"
  | "HANDSHAKE_TIMEOUT"
  | "ABORTED"
  | "NETWORK"
  | "TLS"
  | "PROTOCOL"
  | "CLOSED";

export class TransportError extends CodedError<TransportErrorCode> {
  override name = "TransportError";
}

/** The server (or the proxy in front of it) answered the handshake with an HTTP status. */
export class HandshakeError extends TransportError {
  override name = "HandshakeError";
  readonly status: number;
  /** The response body (truncated), usually the server's reason. */
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
  readonly via: "server" | "proxy";

  constructor(init: {
    status: number;
    body: string;
    headers?: IncomingHttpHeaders;
    via?: "server" | "proxy";
    url: string;
  }) {
    const via = init.via ?? "server";
    const who = via === "proxy" ? "proxy refused CONNECT to" : "server refused WebSocket handshake at";
    const detail = init.body.trim() ? `: ${init.body.trim()}` : "";
    super(
      via === "proxy" ? "PROXY_REJECTED" : "HANDSHAKE_REJECTED",
      `${who} ${init.url} with HTTP ${init.status}${detail}`,
    );
    this.status = init.status;
    this.body = init.body;
    this.headers = init.headers ?? {};
    this.via = via;
  }
}

/** An established connection ended abnormally; `closeCode` is the WebSocket close code. */
export class ConnectionClosedError extends TransportError {
  override name = "ConnectionClosedError";
  readonly closeCode: number;
  readonly reason: string;

  constructor(closeCode: number, reason: string) {
    const detail = reason ? `: ${reason}` : "";
    super("CLOSED", `WebSocket closed with code ${closeCode} (${describeCloseCode(closeCode)})${detail}`);
    this.closeCode = closeCode;
    this.reason = reason;
  }
}

/** Thrown by an `authenticate` hook to refuse a handshake with an HTTP status and message. */
export class HandshakeRejection extends StatusError {
  override name = "HandshakeRejection";

  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(status, message, headers);
    if (!Number.isInteger(status) || status < 400 || status > 599) {
      throw new RangeError(`HandshakeRejection status must be an HTTP error status (400-599), got ${status}`);
    }
  }
}

function describeCloseCode(code: number): string {
  switch (code) {
    case CloseCode.normal:
      return "normal closure";
    case CloseCode.goingAway:
      return "going away";
    case CloseCode.unsupportedData:
      return "unsupported data";
    case CloseCode.abnormal:
      return "connection lost without a close frame";
    case CloseCode.messageTooBig:
      return "message too big";
    case 1002:
      return "protocol error";
    case 1008:
      return "policy violation";
    case 1011:
      return "server error";
    default:
      return code >= 4000 ? "application-defined" : "see RFC 6455";
  }
}

const TLS_ERROR = /CERT|SELF_SIGNED|UNABLE_TO_|^ERR_TLS_|^ERR_SSL_/;

/** Turns whatever a dial attempt threw into a {@link TransportError} that says where it was going. */
export function toDialError(err: unknown, url: string): TransportError {
  if (err instanceof TransportError) return err;
  const code = (err as { code?: unknown } | undefined)?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (typeof code === "string" && TLS_ERROR.test(code)) {
    return new TransportError("TLS", `TLS failure connecting to ${url}: ${message} (${code})`, {
      cause: err,
    });
  }
  if (typeof code === "string" && !code.startsWith("WS_ERR_")) {
    return new TransportError("NETWORK", `cannot connect to ${url}: ${message}`, { cause: err });
  }
  return new TransportError("PROTOCOL", `WebSocket handshake with ${url} failed: ${message}`, { cause: err });
}
