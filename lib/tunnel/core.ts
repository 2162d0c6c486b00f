/**
 * The tunnel: one WebSocket, a yamux multiplexer over it, typed stream headers, the sessions and
 * the reconnecting client built from them, and the HTTP adapters. It knows nothing of GitLab,
 * Kubernetes or Redis.
 *
 * The npm package's main entry. The gRPC adapters are `gitlab-agent-tunnel/grpc`
 * (`./grpc/index.ts`), apart because they need the application's own `@grpc/grpc-js`.
 *
 * @module gitlab-agent-tunnel
 */
export { CodedError, StatusError } from "./errors.ts";
export {
  type AdmitStream,
  type DispatchResult,
  HeaderError,
  type HeaderErrorCode,
  Kind,
  type OpenStream,
  type OpenWithHeaderOptions,
  openWithHeader,
  type RegisterOptions,
  RejectCode,
  StreamDispatcher,
  type StreamDispatcherOptions,
  type StreamHandler,
  StreamHeader,
  type StreamHeaderInit,
  StreamRejectedError,
} from "./header/index.ts";
export {
  type HttpStreamServer,
  type OpenOriginStream,
  type StreamPeer,
  serveHttp,
  TunnelDispatcher,
  type TunnelDispatcherOptions,
} from "./http/index.ts";
export * from "./session/index.ts";
export * from "./transport/index.ts";
export {
  GoAwayCode,
  ProtocolError,
  Session as YamuxSession,
  type SessionEvents as YamuxSessionEvents,
  type SessionOptions as YamuxOptions,
  type SessionStats as YamuxStats,
  YamuxError,
  YamuxStream,
} from "./yamux/index.ts";
