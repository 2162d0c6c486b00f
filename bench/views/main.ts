// npm run bench:views [-- --json] [-- --rounds 60 --pace 200 --changes 10000 --subscribers 1000 --window 5]
// Cluster views, with two kas replicas (processes of their own) on a real redis-server, the
// Kubernetes test server and an in-process agentk connected to replica A:
// (1) latency from a change written in the Kubernetes API server to the SSE event at a client of
//     replica B, against the same at A and the API server's own watch (client-node's Watch) as
//     the floor;
// (2) bytes agentk sends for 10,000 pod changes as views, against the same changes as the raw watch
//     events the API server writes (what pushing raw objects would send);
// (3) kas B's RSS and CPU with 1,000 SSE subscribers while changes flow, against none.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig, Watch } from "@kubernetes/client-node";
import { EventSource } from "eventsource";
import type { AgentViews, ViewEvent } from "../../modules/cluster_views/views.ts";
import { gitlabJwt, TOKEN } from "../../test/kas/support/fixtures.ts";
import { type KasProcess, portsEnv, spawnKas } from "../../test/kas/support/kas-process.ts";
import { startInProcessAgentk } from "../../test/support/agentk-in-process.ts";
import { GitRepo } from "../../test/support/git-repo.ts";
import { startKubeApiServer } from "../../test/support/kube-apiserver.ts";
import { RedisServer } from "../../test/support/redis-server.ts";
import { createLogger } from "../../tool/observability/index.ts";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { cpuSeconds, rssKiB } from "../scale/proc.ts";

const { args, log } = benchArgs({
  rounds: "60",
  pace: "200",
  changes: "10000",
  subscribers: "1000",
  window: "5",
  rate: "10",
});
const AGENT = "42";
const DEADLINE_MS = 30_000;

async function until(
  what: string,
  predicate: () => boolean | Promise<boolean>,
  ms = DEADLINE_MS,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

// ------------------------------------------------------------------------------------------ setup
const dir = await mkdtemp(join(tmpdir(), "bench-views-"));
const redis = await RedisServer.start();
const repo = await GitRepo.init();
await repo.commit({ ".gitlab/agents/prod/config.yaml": "cluster_views: {}\n" });
const apiSecret = new Uint8Array(crypto.getRandomValues(new Uint8Array(32)));
await writeFile(join(dir, "api_secret"), Buffer.from(apiSecret).toString("base64"));
await writeFile(
  join(dir, "private_secret"),
  Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64"),
);
await writeFile(
  join(dir, "tokens.json"),
  JSON.stringify({ [TOKEN]: { agentId: 42, projectId: 7, agentName: "prod", repository: repo.path } }),
);
const kasEnv = () => ({
  ...portsEnv(),
  KAS_AGENT_STATIC_TOKENS_FILE: join(dir, "tokens.json"),
  KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: join(dir, "api_secret"),
  KAS_PRIVATE_API_LISTEN_AUTHENTICATION_SECRET_FILE: join(dir, "private_secret"),
  KAS_REDIS_SERVER_ADDRESS: `${redis.host}:${redis.port}`,
});
const kasA = await spawnKas(kasEnv());
const kasB = await spawnKas(kasEnv());
const kube = await startKubeApiServer({ historyLimit: 20_000 });
const { store } = kube;
const node = (name: string, cpu: number) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name },
  status: {
    capacity: { cpu: String(cpu), memory: "16Gi" },
    allocatable: { cpu: String(cpu), memory: "15Gi" },
    conditions: [{ type: "Ready", status: "True" }],
  },
});
store.create("nodes", undefined, node("node-a", 4));
store.create("nodes", undefined, node("bench", 1));
store.create("namespaces", undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name: "bench" } });
const agent = await startInProcessAgentk({
  kasUrl: kasA.addresses.agent,
  token: TOKEN,
  kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
  pod: { name: "agentk-0", namespace: "default" },
  log: createLogger({ level: "silent", destination: { write: () => true } }),
});
const api = (kas: KasProcess) => kas.addresses.api!;
const viewsAt = async (kas: KasProcess): Promise<AgentViews | undefined> => {
  const res = await fetch(`${api(kas)}/api/v1/agents/${AGENT}/views`, {
    headers: { "gitlab-kas-api-request": await gitlabJwt(apiSecret) },
  });
  if (res.status === 200) return (await res.json()) as AgentViews;
  await res.arrayBuffer();
  return undefined;
};
await until("the views at B", async () => (await viewsAt(kasB))?.views.nodes?.total === 2);
log(`setup: kas A (pid ${kasA.child.pid}) and B (pid ${kasB.child.pid}) on Redis ${redis.port}; agentk on A`);

const out: string[] = [];
const json: Record<string, unknown> = {};
const ms = (n: number) => round(n, 1);

try {
  // -------------------------------------------------------------------- (1) change -> SSE event
  // The bench node's capacity in the view: the nodes' sum less node-a's 4 cores.
  const cpuOf = (v: AgentViews["views"]) => (v.nodes ? v.nodes.capacity.cpuMillis - 4000 : undefined);
  const watchers: Record<string, { seen: Map<number, number> }> = {};
  const sse = (name: string, kas: KasProcess) => {
    const seen = new Map<number, number>();
    watchers[name] = { seen };
    const source = new EventSource(`${api(kas)}/api/v1/agents/${AGENT}/events`, {
      fetch: async (input, init) =>
        fetch(input, {
          ...init,
          headers: { ...init.headers, "gitlab-kas-api-request": await gitlabJwt(apiSecret) },
        }),
    });
    for (const type of ["snapshot", "change"]) {
      source.addEventListener(type, (m) => {
        const e = JSON.parse(m.data) as ViewEvent;
        const cpu =
          e.type === "snapshot" ? cpuOf(e.agent.views) : e.type === "change" ? cpuOf(e.views) : undefined;
        if (cpu !== undefined && !seen.has(cpu)) seen.set(cpu, performance.now());
      });
    }
    return source;
  };
  const sources = [sse("sse-b", kasB), sse("sse-a", kasA)];
  // The floor: the API server's own watch of nodes, read by client-node's Watch in this process.
  const floor = new Map<number, number>();
  watchers.watch = { seen: floor };
  const kc = new KubeConfig();
  kc.loadFromFile(join(dir, "kubeconfig"));
  const watch = await new Watch(kc).watch(
    "/api/v1/nodes",
    { resourceVersion: String(store.resourceVersion) },
    (_type, obj) => {
      if (obj?.metadata?.name !== "bench") return;
      const cpu = Number(obj.status.capacity.cpu) * 1000;
      if (!floor.has(cpu)) floor.set(cpu, performance.now());
    },
    () => {},
  );
  await until(
    "both SSE clients' snapshots",
    () => watchers["sse-a"]!.seen.size > 0 && watchers["sse-b"]!.seen.size > 0,
  );
  const rounds = Number(args.rounds);
  const lat: Record<string, number[]> = { "sse-b": [], "sse-a": [], watch: [] };
  log(`(1) ${rounds} node changes, ${args.pace} ms apart`);
  for (let i = 0; i < rounds; i++) {
    const cpu = 2 + i; // cores: the node's capacity in the nodes view moves each round
    const t0 = performance.now();
    store.update("nodes", undefined, "bench", node("bench", cpu));
    await until(`round ${i}`, () => Object.values(watchers).every((w) => w.seen.has(cpu * 1000)));
    for (const [name, w] of Object.entries(watchers)) lat[name]!.push(w.seen.get(cpu * 1000)! - t0);
    await sleep(Number(args.pace));
  }
  for (const s of sources) s.close();
  watch.abort();
  const row = (label: string, s: number[], target = "") => [
    label,
    ms(percentile(s, 50)),
    ms(percentile(s, 99)),
    ms(Math.max(...s)),
    target,
  ];
  const p50B = percentile(lat["sse-b"]!, 50);
  out.push(
    `### change in the Kubernetes API -> event (${rounds} rounds)\n`,
    markdownTable(
      ["path", "p50 ms", "p99 ms", "max ms", "target"],
      [
        row(
          "SSE at kas B (agent on A; Redis store + pub/sub)",
          lat["sse-b"]!,
          p50B <= 100 ? "p50 <= 100: ok" : "p50 <= 100: MISSED",
        ),
        row("SSE at kas A (the agent's replica)", lat["sse-a"]!),
        row("baseline: the API server's watch (client-node Watch)", lat.watch!),
      ],
    ),
  );
  json.change_to_event_ms = { p50: ms(p50B), p99: ms(percentile(lat["sse-b"]!, 99)) };

  // ------------------------------------------------------------------ (2) bytes over the tunnel
  const changes = Number(args.changes);
  const pods = Math.min(1000, changes);
  log(`(2) ${changes} pod changes (${pods} pods created, then status updates)`);
  const metric = async (name: string) => {
    const text = await (await fetch(`${agent.agent.urls.observability}/metrics`)).text();
    const line = text.split("\n").filter((l) => l.startsWith(name));
    return line.reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
  };
  const bytesBefore = await metric("agentk_cluster_views_bytes_total");
  const messagesBefore = await metric("agentk_cluster_views_messages_total");
  let raw = 0;
  let rawEvents = 0;
  const onChange = (e: { type: string; object: { kind?: string } }) => {
    if (e.object.kind !== "Pod") return;
    raw += JSON.stringify({ type: e.type, object: e.object }).length + 1;
    rawEvents++;
  };
  store.on("change", onChange);
  const podOf = (i: number, phase: string, restarts: number) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `p-${i}`, labels: { app: "bench", tier: "web" } },
    spec: {
      containers: [
        { name: "app", image: "registry.example.com/bench/app:1.0.0", ports: [{ containerPort: 8080 }] },
      ],
    },
    status: {
      phase,
      containerStatuses: [{ name: "app", restartCount: restarts, ready: phase === "Running" }],
    },
  });
  const phases = ["Running", "Pending", "Running", "Succeeded", "Running", "Failed"];
  let done = 0;
  while (done < changes) {
    // 200 changes per turn of the event loop: a busy cluster, not one synchronous burst.
    for (const end = Math.min(changes, done + 200); done < end; done++) {
      if (done < pods) store.create("pods", "bench", podOf(done, "Pending", 0));
      else {
        const i = done % pods;
        store.update("pods", "bench", `p-${i}`, {
          status: podOf(i, phases[done % phases.length]!, done).status,
        });
      }
    }
    await new Promise((r) => setImmediate(r));
  }
  store.off("change", onChange);
  // The last change marks the end: the final counts at B.
  const last = new Map<number, string>();
  for (let c = pods; c < changes; c++) last.set(c % pods, phases[c % phases.length]!);
  const expectRunning = [...Array(pods).keys()].filter(
    (i) => (last.get(i) ?? "Pending") === "Running",
  ).length;
  await until(
    "the final counts at B",
    async () => (await viewsAt(kasB))?.views.pods?.namespaces.bench?.phases.Running === expectRunning,
  );
  const views = (await metric("agentk_cluster_views_bytes_total")) - bytesBefore;
  const messages = (await metric("agentk_cluster_views_messages_total")) - messagesBefore;
  const ratio = raw / views;
  out.push(
    `\n### ${changes} pod changes: bytes agentk sends\n`,
    markdownTable(
      ["as", "messages", "bytes", "bytes / change", "raw / views", "target"],
      [
        [
          "computed views (PushViews payloads)",
          messages,
          views,
          round(views / changes, 1),
          round(ratio, 1),
          ratio >= 10 ? ">= 10x: ok" : ">= 10x: MISSED",
        ],
        [
          "baseline: raw watch events (as the API server writes them)",
          rawEvents,
          raw,
          round(raw / changes, 1),
          1,
          "",
        ],
      ],
    ),
  );
  json.raw_over_views_bytes = round(ratio, 1);

  // ------------------------------------------------------------- (3) kas B with 1,000 subscribers
  const subscribers = Number(args.subscribers);
  const windowMs = Number(args.window) * 1000;
  const pid = kasB.child.pid!;
  let tick = 100;
  /** Node changes at `rate`/s for the window; kas B's CPU % of one core meanwhile. */
  const cpuWhileChanging = async () => {
    const c0 = cpuSeconds(pid);
    const t0 = performance.now();
    const period = 1000 / Number(args.rate);
    while (performance.now() - t0 < windowMs) {
      store.update("nodes", undefined, "bench", node("bench", ++tick));
      await sleep(period);
    }
    return (100 * (cpuSeconds(pid) - c0)) / ((performance.now() - t0) / 1000);
  };
  await sleep(1000);
  const rss0 = rssKiB(pid) / 1024;
  const cpu0 = await cpuWhileChanging();
  log(`(3) ${subscribers} SSE subscribers at kas B`);
  const url = new URL(api(kasB));
  const clients: { socket: Socket; text: string; error?: string }[] = [];
  // In batches of 100, each batch's snapshots in before the next: the listener's backlog is not a subject here.
  while (clients.length < subscribers) {
    const batch: typeof clients = [];
    const jwt = await gitlabJwt(apiSecret);
    for (let i = clients.length; i < Math.min(subscribers, clients.length + 100); i++) {
      const socket = connect(Number(url.port), url.hostname);
      const c: (typeof clients)[number] = { socket, text: "" };
      socket.on("data", (d: Buffer) => {
        // Only the tail matters (the newest event): bounded.
        c.text = (c.text + d.toString()).slice(-4096);
      });
      socket.on("error", (err) => {
        c.error = err.message;
      });
      const path = i % 2 ? "/api/v1/events" : `/api/v1/agents/${AGENT}/events`;
      socket.write(`GET ${path} HTTP/1.1\r\nhost: kas\r\ngitlab-kas-api-request: ${jwt}\r\n\r\n`);
      batch.push(c);
    }
    clients.push(...batch);
    await until(`subscribers' snapshots (${clients.length} of ${subscribers})`, () => {
      const failed = batch.find((c) => c.error !== undefined);
      if (failed) throw new Error(`a subscriber failed: ${failed.error}`);
      return batch.every((c) => c.text.includes("event: snapshot"));
    });
  }
  await sleep(1000);
  const rss1 = rssKiB(pid) / 1024;
  const cpu1 = await cpuWhileChanging();
  const marker = `"cpuMillis":${(tick + 4) * 1000}`;
  await until("the last change at every subscriber", () => clients.every((c) => c.text.includes(marker)));
  for (const c of clients) c.socket.destroy();
  out.push(
    `\n### kas B while nodes change ${args.rate}/s for ${args.window} s\n`,
    markdownTable(
      ["SSE subscribers", "RSS MiB", "CPU % of a core", "every subscriber got the last change"],
      [
        [`baseline: 0`, round(rss0, 1), round(cpu0, 1), "-"],
        [subscribers, round(rss1, 1), round(cpu1, 1), "yes"],
      ],
    ),
  );
  json.subscribers = subscribers;
  json.kas_rss_mib = round(rss1, 1);
} finally {
  await agent.stop();
  kasA.kill();
  kasB.kill();
  await kube.close();
  await redis.close();
  await repo.remove();
  await rm(dir, { recursive: true, force: true });
}

if (args.json) {
  process.stdout.write(
    `${JSON.stringify({
      change_to_event_ms: json.change_to_event_ms,
      raw_over_views_bytes: json.raw_over_views_bytes,
      subscribers: json.subscribers,
      kas_rss_mib: json.kas_rss_mib,
    })}\n`,
  );
} else {
  process.stdout.write(`${out.join("\n")}\n\nnode ${process.version}\n`);
}
process.exit(0);
