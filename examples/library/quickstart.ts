// gitlab-agent-tunnel in one process: an agent dials ONE WebSocket to a server, and the server
// sends HTTP requests through it to a service on the agent's side that listens on no port.
// Loopback and an ephemeral port: it runs as written. Expected output:
//   agent-1 200 hello from the agent: /hello
import {
  HandshakeRejection,
  Kind,
  openWithHeader,
  StreamDispatcher,
  serveHttp,
  serveTunnels,
  TunnelClient,
  TunnelDispatcher,
  type TunnelSession,
} from "gitlab-agent-tunnel";
import { request } from "undici";

// The accepting end (kas's role): authenticates each tunnel before the WebSocket upgrade.
type Agent = { name: string };
let onSession!: (session: TunnelSession<Agent>) => void;
const connected = new Promise<TunnelSession<Agent>>((resolve) => (onSession = resolve));
const server = await serveTunnels<Agent>({
  host: "127.0.0.1",
  port: 0, // any free port; server.url says which
  authenticate: (req) => {
    if (req.headers.authorization !== "Bearer s3cret") throw new HandshakeRejection(401, "bad token");
    return { name: "agent-1" }; // becomes session.identity
  },
  onSession,
});

// The dialing end (agentk's role): keeps one tunnel up and serves HTTP on the streams it is sent.
const web = serveHttp((req, res) => res.end(`hello from the agent: ${req.url}`));
const streams = new StreamDispatcher().register(Kind.KIND_HTTP, (stream) => web.handle(stream));
const client = new TunnelClient({
  url: server.url,
  dial: { headers: { authorization: "Bearer s3cret" } },
  onStream: (stream) => void streams.handle(stream, undefined),
}).start();

// Back on the accepting end: HTTP through the tunnel, one stream per kept-alive connection. The
// origin's host is not resolved: it names the service, in the stream's header.
const session = await connected;
const toAgent = new TunnelDispatcher((_origin, { signal }) =>
  openWithHeader(() => session.open(), { kind: Kind.KIND_HTTP, service: "web" }, { signal }),
);
const res = await request("http://web/hello", { dispatcher: toAgent });
console.log(session.identity.name, res.statusCode, await res.body.text());

await toAgent.close();
await client.close();
await web.close();
await server.close();
