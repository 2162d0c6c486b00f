/**
 * The agent's gRPC channel as the daemons run it: a real TunnelClient dials serveTunnels over
 * loopback WebSockets; the dialing side calls the test service through `tunnelClientChannel`, the
 * listening side serves it on the `KIND_GRPC` streams of every tunnel (`tunnelGrpcHandler`), with
 * the identity the authenticate hook gave each tunnel as the calls' peer.
 */
import type net from "node:net";
import * as grpc from "@grpc/grpc-js";
import {
  createGrpcStreamServer,
  type GrpcStreamServer,
  type TunnelChannel,
  type TunnelClientChannelOptions,
  tunnelClientChannel,
  tunnelGrpcHandler,
} from "../../../lib/tunnel/grpc/index.ts";
import { Kind, StreamDispatcher } from "../../../lib/tunnel/header/index.ts";
import { serveTunnels, TunnelClient, type TunnelSession } from "../../../lib/tunnel/session/index.ts";
import type { GenericClient } from "./client-calls.ts";
import { TestClient, type TestServiceRecorder, testServer } from "./test-service.ts";

/** What the authenticate hook says about a tunnel: the agent (from its credentials) and its number. */
export interface TunnelIdentity {
  agent: string;
  tunnel: number;
}

export interface TunnelClientRig {
  client: GenericClient;
  channel: TunnelChannel;
  tunnelClient: TunnelClient;
  recorder: TestServiceRecorder;
  streams: GrpcStreamServer<TunnelIdentity>;
  /** The listening side's tunnels, in the order they came up. */
  sessions: TunnelSession<TunnelIdentity>[];
  /** The TCP connections under them, for cutting. */
  sockets: net.Socket[];
  /** Which tunnel a call the service saw came over. */
  tunnelOf(call: { readonly metadata: grpc.Metadata }): number | undefined;
  close(): Promise<void>;
}

export interface TunnelClientRigOptions {
  /** `tunnelGrpcHandler`'s grace for calls on a draining tunnel. */
  drainGraceMs?: number;
  channel?: TunnelClientChannelOptions;
  /** Runs on each of the listening side's tunnels once it is up. */
  onSession?: (session: TunnelSession<TunnelIdentity>) => void;
  /** False: the TunnelClient is not started (call `tunnelClient.start()`). */
  start?: boolean;
}

export async function tunnelClientRig(opts: TunnelClientRigOptions = {}): Promise<TunnelClientRig> {
  const { server, recorder } = testServer();
  const streams = createGrpcStreamServer<TunnelIdentity>(server);
  const dispatcher = new StreamDispatcher<TunnelSession<TunnelIdentity>>().register(
    Kind.KIND_GRPC,
    tunnelGrpcHandler(streams, {
      ...(opts.drainGraceMs !== undefined && { drainGraceMs: opts.drainGraceMs }),
    }),
  );
  const sessions: TunnelSession<TunnelIdentity>[] = [];
  const sockets: net.Socket[] = [];
  let handshakes = 0;
  const tunnels = await serveTunnels<TunnelIdentity>({
    host: "127.0.0.1",
    authenticate: (request) => ({ agent: String(request.headers["x-agent"]), tunnel: ++handshakes }),
    onSession: (session) => {
      sessions.push(session);
      session.on("stream", (stream) => void dispatcher.handle(stream, session));
      opts.onSession?.(session);
    },
  });
  tunnels.listener.server.on("connection", (socket: net.Socket) => sockets.push(socket));
  const tunnelClient = new TunnelClient({
    url: tunnels.url,
    dial: { headers: { "x-agent": "agent-1" } },
    backoff: { initialMs: 20, maxMs: 200, jitter: 0 },
    // A tunnel is stable once the server has said anything: its GoAway is then answered at once.
    stableAfterMs: 0,
  });
  if (opts.start !== false) tunnelClient.start();
  const channel = tunnelClientChannel(tunnelClient, { label: "agent-1", ...opts.channel });
  const client = new TestClient("ignored", grpc.credentials.createInsecure(), {
    channelOverride: channel,
  }) as GenericClient;
  return {
    client,
    channel,
    tunnelClient,
    recorder,
    streams,
    sessions,
    sockets,
    tunnelOf: (call) => streams.peerOf(call)?.tunnel,
    async close() {
      client.close();
      await tunnelClient.close(100);
      await streams.close(0);
      await tunnels.close(100);
      server.forceShutdown();
    },
  };
}
