// The far end of the RPC benchmark, run as its own process: agentk's side. One node:http server
// and one grpc-js server, each reachable two ways: directly on a loopback TCP port, and through
// the tunnel this process dials to the near end (argv[2]), whose streams are dispatched by their
// header to the same two servers. Prints `AgentPorts` as one JSON line once the tunnel is up;
// exits when stdin ends.
import { once } from "node:events";
import { createServer } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import * as grpc from "@grpc/grpc-js";
import {
  createGrpcStreamServer,
  Kind,
  StreamDispatcher,
  serveHttp,
  TunnelClient,
  type TunnelSession,
} from "../../lib/tunnel/index.ts";
import { type GreeterServiceServer, GreeterServiceService } from "../../proto/gen/example/v1/greeter.ts";
import { jsStreamOver } from "./js-stream.ts";
import type { AgentPorts } from "./protocol.ts";

const tunnelUrl = process.argv[2];
if (!tunnelUrl) throw new Error("usage: agent.ts <tunnel ws:// url>");

// ---- the in-cluster services ----
const BODY = Buffer.from(JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Success", code: 200 }));
const http = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": BODY.length });
  res.end(BODY);
});
// Connections stay up for the whole run on both paths: the benchmark measures requests, not dials.
http.keepAliveTimeout = 60_000;
http.listen(0, "127.0.0.1");
await once(http, "listening");

const greeter: GreeterServiceServer = {
  sayHello: (call, cb) => cb(null, { message: `hello ${call.request.name}` }),
};
const grpcServer = new grpc.Server();
grpcServer.addService(GreeterServiceService, greeter);
const grpcPort = await new Promise<number>((resolve, reject) =>
  grpcServer.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) =>
    err ? reject(err) : resolve(port),
  ),
);

// ---- the same services behind the tunnel ----
const httpStreams = serveHttp(http);
const grpcStreams = createGrpcStreamServer(grpcServer);
const dispatcher = new StreamDispatcher<TunnelSession>()
  .register(Kind.KIND_HTTP, (stream) => httpStreams.handle(stream))
  .register(Kind.KIND_GRPC, (stream) => grpcStreams.inject(stream));
// ---- the floor: the same gRPC server over a JS stream on plain TCP, no tunnel ----
const jsStreams = createTcpServer((socket) => grpcStreams.inject(jsStreamOver(socket)));
jsStreams.listen(0, "127.0.0.1");
await once(jsStreams, "listening");

const tunnel = new TunnelClient({
  url: tunnelUrl,
  onStream: (stream, session) => void dispatcher.handle(stream, session),
}).start();
await tunnel.ready(10_000);

const ports: AgentPorts = {
  http: (http.address() as AddressInfo).port,
  grpc: grpcPort,
  grpcJsStream: (jsStreams.address() as AddressInfo).port,
};
process.stdout.write(`${JSON.stringify(ports)}\n`);
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
