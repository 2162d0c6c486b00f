// A gRPC service on a private network, called from outside through ONE outbound tunnel.
// Run: npx tsx examples/grpc-behind-nat.ts
import * as grpc from "@grpc/grpc-js";
import * as tunnel from "../lib/tunnel/index.ts";
import {
  GreeterServiceClient,
  type GreeterServiceServer,
  GreeterServiceService,
} from "../proto/gen/example/v1/greeter.ts";

// Public side: accepts tunnels. Nothing ever connects inward to the private side.
let onSession!: (session: tunnel.TunnelSession) => void;
const agentTunnel = new Promise<tunnel.TunnelSession>((resolve) => (onSession = resolve));
const publicSide = await tunnel.serveTunnels({ host: "127.0.0.1", onSession });

// Private side: an ordinary grpc-js server, fed with the streams that arrive through the tunnel
// it dialed itself.
const greeter: GreeterServiceServer = {
  sayHello: (call, done) => done(null, { message: `hello, ${call.request.name}, from behind the NAT` }),
};
const server = new grpc.Server();
server.addService(GreeterServiceService, greeter);
const grpcStreams = tunnel.createGrpcStreamServer(server);
const dispatcher = new tunnel.StreamDispatcher().register(tunnel.Kind.KIND_GRPC, (s) =>
  grpcStreams.inject(s),
);
const agent = new tunnel.TunnelClient({
  url: publicSide.url,
  onStream: (s) => void dispatcher.handle(s, {}),
});
agent.start();

// Public side again: a generated grpc-js client whose HTTP/2 connection runs over a tunnel stream.
const toAgent = await agentTunnel;
const channel = tunnel.createTunnelChannel((signal) =>
  tunnel.openWithHeader(() => toAgent.open(), { kind: tunnel.Kind.KIND_GRPC }, { signal }),
);
const client = new GreeterServiceClient("greeter", grpc.credentials.createInsecure(), {
  channelOverride: channel,
});
client.sayHello({ name: "world" }, async (err, reply) => {
  console.log(err ? `gRPC call failed: ${err.message}` : `gRPC reply through the tunnel: ${reply.message}`);
  channel.close();
  await grpcStreams.close();
  await agent.close(1000);
  await publicSide.close(1000);
  process.exitCode = err ? 1 : 0;
});
