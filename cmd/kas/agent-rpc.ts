import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { createGrpcStreamServer } from "../../lib/tunnel/index.ts";
import type { AgentRpc, AgentSession } from "../../modules/runtime/index.ts";

/** kas's end of the agents' gRPC channel: one grpc-js server, fed with the `grpc` streams agents open. */
export interface AgentRpcServer extends AgentRpc {
  /** Serves the HTTP/2 connection an agent runs over `stream`, which came over `session`. */
  inject(stream: Duplex, session: AgentSession): void;
  /** GOAWAY on every connection; calls in flight get `graceMs`. */
  close(graceMs: number): Promise<void>;
}

export function createAgentRpcServer(): AgentRpcServer {
  const server = new grpc.Server();
  const streams = createGrpcStreamServer<AgentSession>(server);
  return {
    server,
    inject: (stream, session) => streams.inject(stream, session),
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
