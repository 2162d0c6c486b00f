/** What the agent process prints, as one JSON line, once its tunnel is up. */
export interface AgentPorts {
  /** The node:http server, directly. */
  http: number;
  /** The grpc-js server, directly. */
  grpc: number;
  /** The same grpc-js server behind a JS stream on plain TCP (js-stream.ts): the floor of a stream-carried call. */
  grpcJsStream: number;
}
