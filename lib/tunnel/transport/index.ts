export { TunnelAcceptor } from "./acceptor.ts";
export type { AttachableServer, AttachOptions } from "./attach.ts";
export { dial } from "./client.ts";
export { type CloseInfo, type HttpVersion, TransportConnection } from "./connection.ts";
export {
  CloseCode,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_MAX_PAYLOAD,
  DEFAULT_MAX_PENDING_HANDSHAKES,
  DEFAULT_PATH,
  H2_WINDOW_SIZE,
  RETRY_SCHEDULED_HEADER,
  TUNNEL_SUBPROTOCOL,
} from "./constants.ts";
export {
  ConnectionClosedError,
  HandshakeError,
  HandshakeRejection,
  TransportError,
  type TransportErrorCode,
} from "./errors.ts";
export type { HandshakeRequest } from "./handshake-request.ts";
export { type ListenOptions, listen, type TunnelListener } from "./listen.ts";
export type {
  AcceptorOptions,
  Authenticate,
  DialOptions,
  HandshakeStats,
  RejectedHandshake,
} from "./options.ts";
export { classify, createSniffingServer, HTTP2_PREFACE, type SniffingServerOptions } from "./sniff.ts";
