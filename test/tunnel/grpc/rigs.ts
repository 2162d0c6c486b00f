/**
 * The test service served two ways, behind the same client surface:
 * - `tcp`: a plain grpc-js server bound to a loopback port, a plain client (the reference);
 * - `tunnel`: a real yamux session over a loopback socket pair; the client's HTTP/2 connection
 *   runs over streams it opens, the server is fed the accepted streams.
 */
import * as grpc from "@grpc/grpc-js";
import {
  createGrpcStreamServer,
  createTunnelChannel,
  type GrpcStreamServer,
} from "../../../lib/tunnel/grpc/index.ts";
import type { Session, YamuxStream } from "../../../lib/tunnel/yamux/index.ts";
import { sessionPair } from "../yamux/harness.ts";
import type { GenericClient } from "./client-calls.ts";
import { TestClient, type TestServiceRecorder, testServer } from "./test-service.ts";

export type RigName = "tcp" | "tunnel";

type ClientChannel = ReturnType<grpc.Client["getChannel"]>;

export interface Rig {
  name: RigName;
  client: GenericClient;
  channel: ClientChannel;
  recorder: TestServiceRecorder;
  close(): Promise<void>;
}

export async function tcpRig(serverOptions?: grpc.ServerOptions): Promise<Rig> {
  const { server, recorder } = testServer(serverOptions);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const client = new TestClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.enable_http_proxy": 0,
  }) as GenericClient;
  return {
    name: "tcp",
    client,
    channel: client.getChannel(),
    recorder,
    async close() {
      client.close();
      server.forceShutdown();
    },
  };
}

export interface TunnelRig<P = string> extends Rig {
  session: { client: Session; server: Session };
  streamServer: GrpcStreamServer<P>;
  /** Every stream the channel opened, in order. */
  opened: YamuxStream[];
}

export async function tunnelRig(serverOptions?: grpc.ServerOptions): Promise<TunnelRig> {
  const { server, recorder } = testServer(serverOptions);
  const pair = await sessionPair();
  const streamServer = createGrpcStreamServer<string>(server);
  pair.server.on("stream", (s) => streamServer.inject(s, "agent-1"));
  const opened: YamuxStream[] = [];
  const channel = createTunnelChannel(
    async () => {
      const s = await pair.client.open();
      opened.push(s);
      return s;
    },
    { label: "agent-1" },
  );
  const client = new TestClient("ignored", grpc.credentials.createInsecure(), {
    channelOverride: channel,
  }) as GenericClient;
  return {
    name: "tunnel",
    client,
    channel,
    recorder,
    session: pair,
    streamServer,
    opened,
    async close() {
      client.close();
      await streamServer.close(0);
      server.forceShutdown();
      pair.close();
    },
  };
}

export const rigs: Record<RigName, (serverOptions?: grpc.ServerOptions) => Promise<Rig>> = {
  tcp: tcpRig,
  tunnel: tunnelRig,
};

/** Resolves on the next connectivity change away from `from`; rejects after `ms`. */
export function stateChange(channel: ClientChannel, from: grpc.connectivityState, ms = 5000): Promise<void> {
  return new Promise((resolve, reject) =>
    channel.watchConnectivityState(from, Date.now() + ms, (err) => (err ? reject(err) : resolve())),
  );
}
