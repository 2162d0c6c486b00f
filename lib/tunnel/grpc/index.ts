export {
  createGrpcStreamServer,
  DEFAULT_CLOSE_GRACE_MS,
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
