// npm run bench:router [-- --json] [-- --requests 2000 --discoveries 20 --agents 1000 --window-s 30]
// Three kas routers in this process, each with its own private API, Redis connections and agent
// listener, on one real redis-server. Measures, in one run: request latency through a local
// tunnel vs. one peer hop; discovery (tunnel registered on A -> waiting request at B served);
// Redis commands per second at steady state with N agents over the three replicas.
import { randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import { setImmediate as tick } from "node:timers/promises";
import { Redis } from "ioredis";
import { Router } from "../../lib/router/index.ts";
import { Kind, StreamDispatcher } from "../../lib/tunnel/header/index.ts";
import {
  serveTunnels,
  TunnelClient,
  type TunnelServer,
  type TunnelSession,
} from "../../lib/tunnel/session/index.ts";
import { RedisServer } from "../../test/support/redis-server.ts";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";

const { args, log } = benchArgs({
  requests: "2000",
  discoveries: "20",
  agents: "1000",
  "window-s": "30",
});
const REQUESTS = Number(args.requests);
const DISCOVERIES = Number(args.discoveries);
const AGENTS = Number(args.agents);
const WINDOW_MS = Number(args["window-s"]) * 1000;

// ---- the cluster: Redis, three replicas (default production timings), one agent per replica ----
const redis = await RedisServer.start();
const secret = randomBytes(32);
interface Replica {
  router: Router;
  agents: TunnelServer<string>;
  /** The server side of the first tunnel each agent opened here. */
  tunnels: Map<string, TunnelSession<string>>;
}
async function replica(name: string): Promise<Replica> {
  const router = await new Router({
    replicaId: name,
    privateApi: { host: "127.0.0.1", auth: { secret } },
    redis: { server: redis.connection },
  }).start();
  const tunnels = new Map<string, TunnelSession<string>>();
  const agents = await serveTunnels<string>({
    host: "127.0.0.1",
    authenticate: (req) => String(req.headers["x-agent-id"]),
    onSession: (s) => {
      tunnels.set(s.identity, s);
      router.register(s.identity, s);
    },
  });
  return { router, agents, tunnels };
}
const [a, b, c] = (await Promise.all(["a", "b", "c"].map(replica))) as [Replica, Replica, Replica];

/** An agent that echoes every stream. */
function agent(r: Replica, id: string): Promise<TunnelSession> {
  const dispatcher = new StreamDispatcher();
  dispatcher.register(Kind.KIND_HTTP, (s) => {
    s.on("error", () => {});
    s.pipe(s);
  });
  const client = new TunnelClient({
    url: r.agents.url,
    dial: { headers: { "x-agent-id": id } },
    onStream: (s) => void dispatcher.handle(s, undefined),
  }).start();
  clients.push(client);
  return client.ready(5000);
}
const clients: TunnelClient[] = [];
await Promise.all([agent(a, "1"), agent(b, "2"), agent(c, "3")]);
// Registrations reach Redis (hold() is fire-and-forget): wait until B sees agent 1 at A.
for (const giveUp = Date.now() + 5000; (await b.router.cluster.lookup("1")).length === 0; ) {
  if (Date.now() > giveUp) throw new Error("agent 1 never appeared in Redis");
  await new Promise((r) => setTimeout(r, 10));
}
const HEADER = { kind: Kind.KIND_HTTP, service: "echo" } as const;
const PAYLOAD = Buffer.alloc(64, 0x61);

// ---- 1. request latency: dial (stream + header round trip) + 64-byte echo, one at a time ----
async function request(router: Router, agentId: string): Promise<number> {
  const start = performance.now();
  const s = await router.dial(agentId, HEADER);
  s.end(PAYLOAD);
  await readBytes(s, PAYLOAD.length);
  return (performance.now() - start) * 1000;
}
function readBytes(s: Duplex, n: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = 0;
    s.on("data", (c: Buffer) => {
      got += c.length;
      if (got >= n) resolve();
    });
    s.once("error", reject);
  });
}
async function latency(router: Router): Promise<number[]> {
  for (let i = 0; i < 200; i++) await request(router, "1"); // warm-up
  const sample: number[] = [];
  for (let i = 0; i < REQUESTS; i++) sample.push(await request(router, "1"));
  return sample;
}
log(`latency: ${REQUESTS} requests to agent 1 (held by A) from A (local) and from B (peer hop)…`);
const local = await latency(a.router);
const peer = await latency(b.router);

// ---- 2. discovery: a request waits at B, then a tunnel for the agent registers at A ----
log(`discovery: ${DISCOVERIES} rounds…`);
const discovery: number[] = [];
const tunnelAtA = a.tunnels.get("1")!;
for (let i = 0; i < DISCOVERIES; i++) {
  const id = String(900_000 + i);
  let registeredAt = 0;
  const served = b.router.dial(id, HEADER, { deadline: Date.now() + 5000 }).then((s) => {
    const t = performance.now() - registeredAt;
    s.destroy();
    return t;
  });
  await b.router.cluster.lookup(id); // queued behind the dial's own lookup on the same connection
  await tick(); // the dial has seen "nobody" and is waiting
  registeredAt = performance.now();
  const unregister = a.router.register(id, tunnelAtA); // the real tunnel of agent 1, under a new id
  discovery.push(await served);
  unregister();
}

// ---- 3. Redis traffic at steady state with AGENTS agents over the three replicas ----
// Ids are registered on each replica's real agent tunnel (agents 1, 2, 3 count among them):
// registration is what drives Redis traffic; opening AGENTS WebSockets would only cost time.
log(`redis: registering ${AGENTS} agent ids over 3 replicas, measuring a ${WINDOW_MS / 1000} s window…`);
const replicas = [a, b, c];
for (let i = 4; i <= AGENTS; i++) {
  const r = replicas[i % 3]!;
  r.router.register(String(i), [...r.tunnels.values()][0]!);
}
const probe = new Redis(redis.connection);
const stats = async () => {
  const info = await probe.info("all");
  const total = Number(/total_commands_processed:(\d+)/.exec(info)![1]);
  const per: Record<string, number> = {};
  for (const m of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) per[m[1]!] = Number(m[2]);
  return { total, per };
};
await new Promise((r) => setTimeout(r, 2000)); // let the registration burst finish
const before = await stats();
const t0 = performance.now();
await new Promise((r) => setTimeout(r, WINDOW_MS));
const after = await stats();
const seconds = (performance.now() - t0) / 1000;
const probeCommands = 1; // the first INFO is counted in `after`
const opsPerSec = (after.total - before.total - probeCommands) / seconds;
const breakdown = Object.entries(after.per)
  .map(([cmd, n]) => [cmd, n - (before.per[cmd] ?? 0) - (cmd === "info" ? probeCommands : 0)] as const)
  .filter(([, n]) => n > 0)
  .map(([cmd, n]) => `${cmd} ${round(n / seconds, 2)}/s`)
  .join(", ");
const held = replicas.map((r) => r.router.cluster.held);

// ---- report ----
const result = {
  routed_p50_us: { local: Math.round(percentile(local, 50)), peer: Math.round(percentile(peer, 50)) },
  discovery_ms: round(percentile(discovery, 50), 2),
  redis_ops_per_s: round(opsPerSec, 1),
};
if (args.json) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  const hop = (percentile(peer, 50) - percentile(local, 50)) / 1000;
  const rows: Array<Array<string | number>> = [
    ["request p50, local tunnel", `${round(percentile(local, 50) / 1000, 3)} ms`, "", ""],
    ["request p99, local tunnel", `${round(percentile(local, 99) / 1000, 3)} ms`, "", ""],
    ["request p50, via peer replica", `${round(percentile(peer, 50) / 1000, 3)} ms`, "", ""],
    ["request p99, via peer replica", `${round(percentile(peer, 99) / 1000, 3)} ms`, "", ""],
    ["peer hop added at p50", `${round(hop, 3)} ms`, "<= 1 ms", hop <= 1 ? "ok" : "MISSED"],
    [
      "discovery p50 (register on A -> waiting request at B served)",
      `${result.discovery_ms} ms`,
      "<= 100 ms",
      result.discovery_ms <= 100 ? "ok" : "MISSED",
    ],
    [
      `Redis commands/s, steady state, ${AGENTS} agents / 3 replicas`,
      result.redis_ops_per_s,
      "<= 50",
      opsPerSec <= 50 ? "ok" : "MISSED",
    ],
  ];
  process.stdout.write(`${markdownTable(["metric", "value", "target", ""], rows)}\n`);
  process.stdout.write(
    `\n${REQUESTS} sequential requests each (dial + header round trip + 64-byte echo), ` +
      `${DISCOVERIES} discovery rounds, Redis window ${round(seconds, 1)} s; held per replica: ${held.join("/")}; ` +
      `commands in window: ${breakdown}\n`,
  );
}

probe.disconnect();
for (const client of clients) await client.close(100);
await Promise.all(replicas.map((r) => r.router.close(100)));
await Promise.all(replicas.map((r) => r.agents.close(100)));
await redis.close();
