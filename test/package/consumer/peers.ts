// A consumer of the package's other two entries, which need peer dependencies installed beside it:
// the router (ioredis) and the gRPC adapters (@grpc/grpc-js, the application's own). Prints one
// line per entry it used.
import * as grpc from "@grpc/grpc-js";
import { Kind, StreamDispatcher, serveTunnels, TunnelClient } from "gitlab-agent-tunnel";
import { createGrpcStreamServer } from "gitlab-agent-tunnel/grpc";
import { NoTunnelError, Router } from "gitlab-agent-tunnel/router";

// Router, single replica (no Redis): a dial made before the agent connects waits for its tunnel.
const router = await new Router({}).start();
const server = await serveTunnels<{ agentId: string }>({
  host: "127.0.0.1",
  port: 0,
  authenticate: (req) => ({ agentId: String(req.headers["x-agent-id"]) }),
  onSession: (session) => router.register(session.identity.agentId, session),
});
const dialing = router.dial(
  "42",
  { kind: Kind.KIND_HTTP, service: "echo" },
  { deadline: Date.now() + 10_000 },
);
const streams = new StreamDispatcher().register(Kind.KIND_HTTP, (stream) => void stream.pipe(stream));
const agent = new TunnelClient({
  url: server.url,
  dial: { headers: { "x-agent-id": "42" } },
  onStream: (stream) => void streams.handle(stream, undefined),
}).start();
const stream = await dialing;
stream.end("ping");
let reply = "";
for await (const chunk of stream) reply += chunk;
const missing = await router
  .dial("7", { kind: Kind.KIND_HTTP }, { deadline: Date.now() + 50 })
  .catch((e) => e);
console.log(`router: ${reply}; agent 7: ${missing instanceof NoTunnelError ? missing.code : "?"}`);

// gRPC: a grpc-js server of the application's own, fed with tunnel streams.
const grpcStreams = createGrpcStreamServer(new grpc.Server());
await grpcStreams.close();
console.log("grpc: stream server closed");

await agent.close();
await router.close();
await server.close();
