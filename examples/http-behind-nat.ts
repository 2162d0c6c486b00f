// An HTTP service on a private network, reached from outside through ONE outbound tunnel.
// Run: npx tsx examples/http-behind-nat.ts
import { createServer } from "node:http";
import { fetch } from "undici";
import * as tunnel from "../lib/tunnel/index.ts";

// Public side: accepts tunnels. Nothing ever connects inward to the private side.
let onSession!: (session: tunnel.TunnelSession) => void;
const agentTunnel = new Promise<tunnel.TunnelSession>((resolve) => (onSession = resolve));
const publicSide = await tunnel.serveTunnels({ host: "127.0.0.1", onSession });

// Private side: an ordinary node:http server, fed with the streams that arrive through the tunnel
// it dialed itself. It listens on no port.
const service = createServer((req, res) => {
  res.setHeader("content-type", "text/plain");
  res.end(`# HELP demo_requests_total Requests served.\ndemo_requests_total{path="${req.url}"} 1\n`);
});
const httpStreams = tunnel.serveHttp(service);
const dispatcher = new tunnel.StreamDispatcher().register(tunnel.Kind.KIND_HTTP, (s) =>
  httpStreams.handle(s),
);
const agent = new tunnel.TunnelClient({
  url: publicSide.url,
  onStream: (s) => void dispatcher.handle(s, {}),
});
agent.start();

// Public side again: plain fetch(), whose connections are tunnel streams.
const toAgent = await agentTunnel;
const viaTunnel = new tunnel.TunnelDispatcher((origin, { signal }) =>
  tunnel.openWithHeader(() => toAgent.open(), { kind: tunnel.Kind.KIND_HTTP, service: origin }, { signal }),
);
const res = await fetch("http://prometheus.monitoring/metrics", { dispatcher: viaTunnel });
console.log(`HTTP ${res.status} through the tunnel:\n${await res.text()}`);

await viaTunnel.close();
await httpStreams.close(1000);
await agent.close(1000);
await publicSide.close(1000);
