/**
 * gRPC over tunnel streams: a grpc-js server fed with streams (`createGrpcStreamServer`), client
 * channels whose connections are streams (`createTunnelChannel`, `tunnelClientChannel`), and a
 * handler that forwards gRPC streams to a channel (`tunnelGrpcHandler`). They work with the
 * application's own `@grpc/grpc-js` (a peer dependency of the package).
 *
 * @module gitlab-agent-tunnel/grpc
 */
export {
  createGrpcStreamServer,
  DRAINED_DETAILS,
  type GrpcStreamServer,
  type GrpcStreamServerOptions,
} from "./stream-server.ts";
export {
  createTunnelChannel,
  type OpenGrpcStream,
  TunnelChannel,
  type TunnelChannelOptions,
  tunnelClientOptions,
} from "./tunnel-channel.ts";
export { type TunnelClientChannelOptions, tunnelClientChannel } from "./tunnel-client-channel.ts";
export { type TunnelGrpcHandlerOptions, tunnelGrpcHandler } from "./tunnel-handler.ts";
