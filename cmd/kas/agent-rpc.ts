import * as grpc from "@grpc/grpc-js";
import { createGrpcStreamServer, type StreamHandler, tunnelGrpcHandler } from "../../lib/tunnel/index.ts";
import type { AgentRpc, AgentSession } from "../../modules/runtime/index.ts";

/** kas's end of the agents' gRPC channel: one grpc-js server, fed with the `grpc` streams agents open. */
export interface AgentRpcServer extends AgentRpc {
  /**
   * The `KIND_GRPC` stream handler: serves an agent's HTTP/2 connection, its calls tagged with the
   * tunnel they came over; when that tunnel drains, its connections get GOAWAY so the agent moves
   * its calls to its next tunnel.
   */
  readonly handler: StreamHandler<AgentSession>;
  /** GOAWAY on every connection; calls in flight get `graceMs`, then end UNAVAILABLE. */
  close(graceMs: number): Promise<void>;
}

/** `drainGraceMs`: how long calls on a draining tunnel may run on (below the tunnel's own grace). */
export function createAgentRpcServer(drainGraceMs: number): AgentRpcServer {
  // No channelz: kas serves no channelz service, and its bookkeeping (a registered socket and call
  // tracker per connection) is paid per agent.
  const server = new grpc.Server({ "grpc.enable_channelz": 0 });
  const streams = createGrpcStreamServer<AgentSession>(server);
  return {
    server,
    handler: tunnelGrpcHandler(streams, { peer: (session: AgentSession) => session, drainGraceMs }),
    agentOf(call) {
      const session = streams.peerOf(call);
      if (session) return session;
      throw Object.assign(new Error("not called over an agent's tunnel"), {
        code: grpc.status.UNAUTHENTICATED,
        details: "not called over an agent's tunnel",
      });
    },
    close: (graceMs) => streams.close(graceMs),
  };
}
