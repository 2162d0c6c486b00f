// The private API (servePeers) on its own: peers authenticate with a bearer JWT, each forwarded
// stream is accepted only once an agent tunnel here accepted the same header, and "no tunnel
// here" is told apart from the agent's own refusal (isNoTunnel). No Redis: a PeerPool dials it.
import type { Duplex } from "node:stream";
import { afterAll, expect, test } from "vitest";
import {
  isNoTunnel,
  LocalRegistry,
  NO_TUNNEL_REASON,
  PeerAuth,
  type PeerIdentity,
  PeerPool,
  servePeers,
} from "../../lib/router/index.ts";
import {
  encodeHeaderFrame,
  Kind,
  openWithHeader,
  RejectCode,
  StreamDispatcher,
  type StreamHeaderInit,
  StreamRejectedError,
} from "../../lib/tunnel/header/index.ts";
import { serveTunnels, TunnelClient, type TunnelServer } from "../../lib/tunnel/session/index.ts";
import { dial, HandshakeError } from "../../lib/tunnel/transport/index.ts";
import { until } from "../support/until.ts";
import { readAll, SECRET } from "./harness.ts";

const auth = new PeerAuth({ secret: SECRET });
const local = new LocalRegistry();
const clients: TunnelClient[] = [];
/** Per agent id: the agent's admit hook waits for this while set. */
const gates = new Map<string, Promise<void>>();
const admitted: string[] = [];
const agentStreams: Duplex[] = [];

interface Servers {
  peers: TunnelServer<PeerIdentity>;
  agents: TunnelServer<string>;
  pool: PeerPool;
}

let started: Promise<Servers> | undefined;
/**
 * The servers, started by the first test that needs them. Not in `beforeAll`: there a throwing
 * `servePeers` would only mark the file's tests skipped; here it fails every test that awaits it.
 */
function servers(): Promise<Servers> {
  started ??= (async () => {
    const peers = await servePeers({
      host: "127.0.0.1",
      auth,
      local,
      replicaId: "r1",
      openTimeoutMs: 300,
      tunnel: { keepAliveIntervalMs: 0 },
      limits: { maxConnections: 3 },
    });
    const agents = await serveTunnels<string>({
      host: "127.0.0.1",
      authenticate: (req) => String(req.headers["x-agent-id"]),
      onSession: (s) => local.register(s.identity, s),
    });
    const pool = new PeerPool({ token: () => auth.sign("r2"), tunnel: { keepAliveIntervalMs: 0 } });
    return { peers, agents, pool };
  })();
  return started;
}

afterAll(async () => {
  const s = await started?.catch(() => undefined);
  if (!s) return;
  s.pool.destroy();
  await Promise.all(clients.map((c) => c.close(0)));
  await s.peers.close(0);
  await s.agents.close(0);
});

/** An agent serving gRPC and HTTP kinds: answers "<kind> <header agent id> <service>\n", then echoes. */
async function agent(agentId: string, options: { silent?: boolean } = {}): Promise<TunnelClient> {
  const dispatcher = new StreamDispatcher<undefined>();
  const handler = (stream: Duplex, header: { kind: Kind; agentId: string; service: string }) => {
    stream.on("error", () => {});
    agentStreams.push(stream);
    stream.write(`${header.kind} ${header.agentId} ${header.service}\n`);
    stream.pipe(stream);
  };
  const admit = async (header: { agentId: string }) => {
    admitted.push(header.agentId);
    await gates.get(header.agentId);
  };
  dispatcher.register(Kind.KIND_GRPC, handler, { admit });
  dispatcher.register(Kind.KIND_HTTP, handler, { admit });
  const { agents } = await servers();
  const client = new TunnelClient({
    url: agents.url,
    dial: { headers: { "x-agent-id": agentId } },
    onStream: (stream) =>
      options.silent ? void stream.on("error", () => {}) : void dispatcher.handle(stream, undefined),
  }).start();
  clients.push(client);
  await client.ready(5000);
  await until(() => local.tunnels(agentId).size > 0, 5000, `agent ${agentId} registered`);
  return client;
}

/** Opens a stream through the private API, as a forwarding replica does. */
async function forward(header: StreamHeaderInit, timeoutMs = 2000): Promise<Duplex> {
  const { peers, pool } = await servers();
  return openWithHeader((s) => pool.open(peers.url, s), header, { timeoutMs });
}

test("a forwarded stream reaches the agent with the header unchanged, for every kind", async () => {
  await agent("11");
  for (const kind of [Kind.KIND_GRPC, Kind.KIND_HTTP]) {
    const stream = await forward({ kind, agentId: "11", service: "svc" });
    stream.end("payload");
    expect((await readAll(stream)).toString()).toBe(`${kind} 11 svc\npayload`);
  }
});

test("no tunnel here: NOT_FOUND naming the agent and this replica, which isNoTunnel recognises", async () => {
  const err = await forward({ kind: Kind.KIND_HTTP, agentId: "404" }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(StreamRejectedError);
  expect((err as StreamRejectedError).code).toBe(RejectCode.REJECT_CODE_NOT_FOUND);
  expect((err as StreamRejectedError).reason).toBe("no tunnel for agent 404 at kas replica r1");
  expect(isNoTunnel(err)).toBe(true);
});

test("only a tunnel that cannot take the stream here: UNAVAILABLE (draining), also no tunnel", async () => {
  const c = await agent("12");
  c.active!.goAway(); // the agent's tunnel drains: registered, takes no new streams
  await until(() => !local.usable("12"), 5000, "the tunnel to drain");
  const err = await forward({ kind: Kind.KIND_HTTP, agentId: "12" }).catch((e: unknown) => e);
  expect((err as StreamRejectedError).code).toBe(RejectCode.REJECT_CODE_UNAVAILABLE);
  expect((err as StreamRejectedError).reason).toBe("no tunnel for agent 12 at kas replica r1 (draining)");
  expect(isNoTunnel(err)).toBe(true);
});

test("an agent that gives no verdict within openTimeoutMs counts as no tunnel here", async () => {
  await agent("13", { silent: true });
  const start = Date.now();
  const err = await forward({ kind: Kind.KIND_HTTP, agentId: "13" }, 5000).catch((e: unknown) => e);
  expect(isNoTunnel(err)).toBe(true);
  expect(Date.now() - start).toBeGreaterThanOrEqual(290);
});

test("the agent's own refusal passes through unchanged, and is not 'no tunnel'", async () => {
  await agent("14");
  // The agent's admit hook refuses the stream, as an agent without the service does.
  gates.set(
    "14",
    Promise.reject(new StreamRejectedError(RejectCode.REJECT_CODE_NOT_FOUND, "no such service")),
  );
  gates.get("14")!.catch(() => {});
  const refused = await forward({ kind: Kind.KIND_HTTP, agentId: "14" }).catch((e: unknown) => e);
  gates.delete("14");
  expect(refused).toBeInstanceOf(StreamRejectedError);
  expect((refused as StreamRejectedError).reason).toBe("no such service");
  expect(isNoTunnel(refused)).toBe(false);
});

test("a peer that leaves while the agent decides: the agent's stream is not leaked", async () => {
  await agent("15");
  const { peers, pool } = await servers();
  let release!: () => void;
  gates.set("15", new Promise<void>((r) => (release = r)));
  const before = agentStreams.length;
  const raw = (await pool.open(peers.url)).on("error", () => {});
  raw.write(encodeHeaderFrame({ kind: Kind.KIND_HTTP, agentId: "15" }));
  await until(() => admitted.includes("15"), 5000, "the agent's admit");
  const [session] = [...peers.sessions];
  const streams = session!.stats.openStreams;
  raw.destroy();
  await until(() => session!.stats.openStreams < streams, 5000, "the peer's reset at the private API");
  release();
  await until(() => agentStreams.length === before + 1, 5000, "the agent's accepted stream");
  const upstream = agentStreams.at(-1)!;
  await until(() => upstream.destroyed, 5000, "the agent's stream to be destroyed");
  gates.delete("15");
});

test("a peer without a bearer token, with a malformed one or an invalid one: 401, saying why", async () => {
  const { peers } = await servers();
  const refusal = (headers: Record<string, string>) =>
    dial(peers.url, { headers }).then(
      (t) => {
        t.destroy();
        return undefined;
      },
      (e: unknown) => e as HandshakeError,
    );
  const valid = await auth.sign("r2");
  for (const headers of [
    {} as Record<string, string>,
    { authorization: "Basic abc" },
    { authorization: "Bearer a b" },
    // A valid token, but not alone after the scheme: refused before it is read.
    { authorization: `XBearer ${valid}` },
    { authorization: `Bearer ${valid} more` },
  ]) {
    const err = await refusal(headers);
    expect(err).toBeInstanceOf(HandshakeError);
    expect(err!.status).toBe(401);
    expect(err!.body).toMatch(/a bearer token is required/);
  }
  const forged = await refusal({ authorization: "Bearer not.a.jwt" });
  expect(forged!.status).toBe(401);
  expect(forged!.body).toMatch(/^invalid peer token: \S/);
});

test("a valid token, whatever the case of 'Bearer' and the spaces after it: the session is the signer's", async () => {
  const { peers } = await servers();
  const token = await auth.sign("r9");
  const seen = new Promise<PeerIdentity>((resolve) => {
    const check = () => {
      for (const s of peers.sessions) if (s.identity.replicaId === "r9") return resolve(s.identity);
      setTimeout(check, 5);
    };
    check();
  });
  const t = await dial(peers.url, { headers: { authorization: `bEaReR   ${token}` } });
  expect(await seen).toEqual({ replicaId: "r9" });
  t.destroy();
});

test("the listen limits reach the listener (here: at most 3 connections)", async () => {
  const { peers } = await servers();
  expect(peers.listener.server.maxConnections).toBe(3);
});

test("isNoTunnel: only a NOT_FOUND or UNAVAILABLE refusal whose reason starts with the no-tunnel words", () => {
  const reason = `${NO_TUNNEL_REASON}7 at kas replica x`;
  expect(NO_TUNNEL_REASON).toBe("no tunnel for agent ");
  expect(isNoTunnel(new StreamRejectedError(RejectCode.REJECT_CODE_NOT_FOUND, reason))).toBe(true);
  expect(isNoTunnel(new StreamRejectedError(RejectCode.REJECT_CODE_UNAVAILABLE, reason))).toBe(true);
  expect(isNoTunnel(new StreamRejectedError(RejectCode.REJECT_CODE_UNKNOWN_KIND, reason))).toBe(false);
  expect(isNoTunnel(new StreamRejectedError(RejectCode.REJECT_CODE_NOT_FOUND, `agent says: ${reason}`))).toBe(
    false,
  );
  expect(isNoTunnel(new Error(reason))).toBe(false);
  expect(isNoTunnel(undefined)).toBe(false);
});
