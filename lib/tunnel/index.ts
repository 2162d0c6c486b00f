// The tunnel library: one WebSocket, a yamux multiplexer over it, typed stream headers, the
// sessions and reconnecting client built from them, and gRPC / HTTP adapters on top.
// Knows nothing of GitLab, Kubernetes or Redis.
export { CodedError, StatusError } from "./errors.ts";
export * from "./grpc/index.ts";
export {
  type AdmitStream,
  type DispatchResult,
  HeaderError,
  Kind,
  type OpenStream,
  openWithHeader,
  RejectCode,
  StreamDispatcher,
  type StreamHandler,
  StreamHeader,
  type StreamHeaderInit,
  StreamRejectedError,
} from "./header/index.ts";
export {
  type HttpStreamServer,
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
  type SessionOptions as YamuxOptions,
  type SessionStats as YamuxStats,
  YamuxError,
  YamuxStream,
} from "./yamux/index.ts";
