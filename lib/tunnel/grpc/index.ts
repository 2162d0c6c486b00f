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
