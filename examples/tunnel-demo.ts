// npm run demo [-- --once]
// The tunnel doing kas's and agentk's job on built-in defaults, in one process: an "agent" behind
// NAT dials ONE WebSocket to a "server"; the server then reaches an in-cluster HTTP service
// (Prometheus-style /metrics) and a gRPC service through that tunnel. Ctrl-C stops it cleanly.
import { createServer } from "node:http";
import net from "node:net";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { fetch } from "undici";
import * as tunnel from "../lib/tunnel/index.ts";
import {
  GreeterServiceClient,
  type GreeterServiceServer,
  GreeterServiceService,
} from "../proto/gen/example/v1/greeter.ts";

const { values: args } = parseArgs({ options: { once: { type: "boolean", default: false } } });
const TOKEN = "demo-agent-token";
const say = (who: string, what: string) => console.log(`${who.padEnd(8)} ${what}`);

// 1. An in-cluster service the outside world cannot reach: it listens on loopback only.
let served = 0;
const inCluster = createServer((req, res) => {
  served++;
  res.setHeader("content-type", "text/plain; version=0.0.4");
  res.end(`# TYPE demo_http_requests_total counter\ndemo_http_requests_total{path="${req.url}"} ${served}\n`);
}).listen(0, "127.0.0.1");
await new Promise((resolve) => inCluster.once("listening", resolve));
const servicePort = (inCluster.address() as net.AddressInfo).port;

// 2. The server (kas's role): accepts tunnels from agents that present the token.
let onTunnel!: (session: tunnel.TunnelSession<{ agent: string }>) => void;
const agentTunnel = new Promise<tunnel.TunnelSession<{ agent: string }>>((resolve) => (onTunnel = resolve));
const server = await tunnel.serveTunnels<{ agent: string }>({
  host: "127.0.0.1",
  authenticate: (req) => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`)
      throw new tunnel.HandshakeRejection(401, "unknown token");
    return { agent: "demo-agent" };
  },
  onSession: (session) => {
    say("server", `tunnel up from ${session.identity.agent} (${session.stats.remoteAddress})`);
    onTunnel(session);
  },
});
say("server", `listening for agents on ${server.url}`);

// 3. The agent (agentk's role): dials out, serves gRPC itself and splices HTTP streams to the
// allow-listed in-cluster service.
const greeter: GreeterServiceServer = {
  sayHello: (call, done) => done(null, { message: `hello ${call.request.name}, from inside the cluster` }),
};
const grpcServer = new grpc.Server();
grpcServer.addService(GreeterServiceService, greeter);
const grpcStreams = tunnel.createGrpcStreamServer(grpcServer);
const dispatcher = new tunnel.StreamDispatcher()
  .register(tunnel.Kind.KIND_GRPC, (stream) => grpcStreams.inject(stream))
  .register(tunnel.Kind.KIND_HTTP, (stream) => {
    const upstream = net.connect(servicePort, "127.0.0.1");
    stream.pipe(upstream).pipe(stream);
    upstream.on("error", () => stream.destroy());
    stream.on("error", () => upstream.destroy());
  });
const agent = new tunnel.TunnelClient({
  url: server.url,
  dial: { headers: { authorization: `Bearer ${TOKEN}` } },
  onStream: (stream) => void dispatcher.handle(stream, {}),
});
agent.on("retry", ({ delayMs, error }) => say("agent", `${error.message}; retrying in ${delayMs} ms`));
agent.start();
say("agent", "dialing out (one WebSocket; nothing listens inside the cluster)");

// 4. The server reaches into the cluster through the tunnel.
const toAgent = await agentTunnel;
const openStream = (header: tunnel.StreamHeaderInit) => (signal: AbortSignal) =>
  tunnel.openWithHeader(() => toAgent.open(), header, { signal });
const http = new tunnel.TunnelDispatcher((origin, { signal }) =>
  openStream({ kind: tunnel.Kind.KIND_HTTP, service: new URL(origin).hostname })(signal),
);
const channel = tunnel.createTunnelChannel(openStream({ kind: tunnel.Kind.KIND_GRPC }));
const client = new GreeterServiceClient("greeter", grpc.credentials.createInsecure(), {
  channelOverride: channel,
});

async function round(): Promise<void> {
  const res = await fetch("http://prometheus/metrics", { dispatcher: http });
  const metrics = (await res.text()).trim().split("\n").at(-1);
  say("server", `GET http://prometheus/metrics through the tunnel -> ${res.status}: ${metrics}`);
  const reply = await new Promise<string>((resolve, reject) =>
    client.sayHello({ name: "kas" }, (err, r) => (err ? reject(err) : resolve(r.message))),
  );
  say("server", `gRPC SayHello through the tunnel -> "${reply}"`);
  const s = toAgent.stats;
  say(
    "tunnel",
    `rtt ${s.rttMs.toFixed(2)} ms, ${s.bytesIn} bytes in, ${s.bytesOut} bytes out, ${s.openStreams} streams open`,
  );
}

let stopping = false;
async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  say("demo", "stopping: GoAway, streams finish, tunnels close");
  client.close();
  channel.close();
  await http.close();
  await grpcStreams.close(1000);
  await agent.close(1000);
  await server.close(1000);
  inCluster.close();
  process.exitCode = code;
}
process.once("SIGINT", () => void stop(0));
process.once("SIGTERM", () => void stop(0));

try {
  await round();
  if (args.once) await stop(0);
  else {
    say("demo", "a round every 3 s; Ctrl-C to stop");
    const timer = setInterval(
      () => void round().catch((err) => say("demo", `round failed: ${err.message}`)),
      3000,
    );
    process.once("SIGINT", () => clearInterval(timer));
    process.once("SIGTERM", () => clearInterval(timer));
  }
} catch (err) {
  say("demo", `failed: ${(err as Error).message}`);
  await stop(1);
}
