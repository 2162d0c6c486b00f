// npm run bench:rpc [-- --json] [-- --requests 5000 --concurrency 64 --grpc-calls 1500 --trials 9 --kube-requests 200]
// kas reaching an in-cluster service through agentk's tunnel, against reaching it directly.
// This process plays kas: it serves tunnels and opens streams toward the agent. The agent is a
// second process (agent.ts) that dials in and feeds the streams to a node:http server and a
// grpc-js server, which it also serves on loopback TCP for the direct path. Measures, in one run:
// HTTP GET at N concurrent requests (requests/s, p50, p99) and sequential gRPC unary calls (p50, p99;
// also over a JS stream on plain TCP, the floor of any stream-carried call: js-stream.ts);
// then `kubectl get pods`'s list request through kas's Kubernetes API proxy with a CI job's token
// against the Kubernetes test server directly (kube-list.ts), and GitLab's authorization calls.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { connect } from "node:net";
import os from "node:os";
import { createInterface } from "node:readline";
import * as grpc from "@grpc/grpc-js";
import { Agent, type Dispatcher } from "undici";
import {
  createTunnelChannel,
  Kind,
  openWithHeader,
  serveTunnels,
  TunnelDispatcher,
  type TunnelSession,
} from "../../lib/tunnel/index.ts";
import { GreeterServiceClient } from "../../proto/gen/example/v1/greeter.ts";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { jsStreamOver } from "./js-stream.ts";
import { measureKubeList } from "./kube-list.ts";
import { grpcUnary, httpLoad } from "./load.ts";
import type { AgentPorts } from "./protocol.ts";

const { args, log } = benchArgs({
  requests: "5000",
  concurrency: "64",
  "grpc-calls": "1500",
  trials: "9",
  "kube-requests": "200",
});
const REQUESTS = Number(args.requests);
const CONCURRENCY = Number(args.concurrency);
const GRPC_CALLS = Number(args["grpc-calls"]);
const TRIALS = Number(args.trials);
const KUBE_REQUESTS = Number(args["kube-requests"]);

// ---- the tunnel: the agent process dials in, this side opens streams ----
let sessionUp!: (s: TunnelSession) => void;
const session = new Promise<TunnelSession>((resolve) => {
  sessionUp = resolve;
});
const tunnels = await serveTunnels({ host: "127.0.0.1", onSession: (s) => sessionUp(s) });

let finished = false;
// `node --cpu-prof --cpu-prof-dir=DIR --import tsx bench/rpc/main.ts` profiles the agent as well.
const profiling = process.execArgv.filter((a) => a.startsWith("--cpu-prof"));
const child = spawn(
  process.execPath,
  [...profiling, "--import", "tsx", new URL("./agent.ts", import.meta.url).pathname, tunnels.url],
  { stdio: ["pipe", "pipe", "inherit"] },
);
child.once("exit", (code, signal) => {
  if (finished) return;
  process.stderr.write(`agent process exited early (code ${code}, signal ${signal})\n`);
  process.exit(1);
});
const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
const ports = JSON.parse(line) as AgentPorts;
const tunnel = await session;

// ---- the clients: each path gets the same kind of client, only its connections differ ----
type Path = "direct" | "tunnel";
const paths: Path[] = ["direct", "tunnel"];
const ORIGIN: Record<Path, string> = {
  direct: `http://127.0.0.1:${ports.http}`,
  // Routing information for the agent; the stream itself carries plain HTTP/1.1.
  tunnel: "http://in-cluster-service",
};
const KEEP_ALIVE_MS = 30_000; // connections live through the whole run on both paths
const http: Record<Path, Dispatcher> = {
  direct: new Agent({
    connections: CONCURRENCY,
    keepAliveTimeout: KEEP_ALIVE_MS,
    keepAliveMaxTimeout: KEEP_ALIVE_MS,
  }),
  tunnel: new TunnelDispatcher(
    (origin, { signal }) =>
      openWithHeader(
        () => tunnel.open(),
        { kind: Kind.KIND_HTTP, service: new URL(origin).host },
        { signal },
      ),
    { maxStreams: CONCURRENCY, idleTimeoutMs: KEEP_ALIVE_MS },
  ),
};
const insecure = grpc.credentials.createInsecure();
const greeter: Record<Path, GreeterServiceClient> = {
  direct: new GreeterServiceClient(`127.0.0.1:${ports.grpc}`, insecure, { "grpc.enable_http_proxy": 0 }),
  tunnel: new GreeterServiceClient("tunnel", insecure, {
    channelOverride: createTunnelChannel((signal) =>
      openWithHeader(
        () => tunnel.open(),
        { kind: Kind.KIND_GRPC, service: "example.v1.GreeterService" },
        { signal },
      ),
    ),
  }),
};
// The floor of a call carried by any stream: HTTP/2 over a JS stream on plain TCP (js-stream.ts).
const grpcFloor = new GreeterServiceClient("js-stream", insecure, {
  channelOverride: createTunnelChannel(async () => {
    const socket = connect(ports.grpcJsStream, "127.0.0.1");
    await once(socket, "connect");
    return jsStreamOver(socket);
  }),
});

// ---- measurement ----
log("warming up…");
for (const p of paths) {
  await httpLoad(http[p], ORIGIN[p], Math.min(REQUESTS, 2000), CONCURRENCY);
  await grpcUnary(greeter[p], Math.min(GRPC_CALLS, 1000));
}
await grpcUnary(grpcFloor, Math.min(GRPC_CALLS, 1000));
// Trials are short and many, each running the paths back to back in alternating order, so that a
// noisy neighbour on a shared machine hurts both alike. Requests/s is the median over trials;
// percentiles pool every sample.
const rps: Record<Path, number[]> = { direct: [], tunnel: [] };
const httpMs: Record<Path, number[]> = { direct: [], tunnel: [] };
const grpcUs: Record<Path, number[]> = { direct: [], tunnel: [] };
const grpcFloorUs: number[] = [];
for (let t = 0; t < TRIALS; t++) {
  const order = t % 2 === 0 ? paths : [...paths].reverse();
  for (const p of order) {
    const run = await httpLoad(http[p], ORIGIN[p], REQUESTS, CONCURRENCY);
    rps[p].push(run.requestsPerSec);
    httpMs[p].push(...run.latenciesMs);
  }
  const grpcRuns: Array<[number[], GreeterServiceClient]> = [
    [grpcUs.direct, greeter.direct],
    [grpcUs.tunnel, greeter.tunnel],
    [grpcFloorUs, grpcFloor],
  ];
  for (const [into, client] of t % 2 === 0 ? grpcRuns : grpcRuns.reverse()) {
    into.push(...(await grpcUnary(client, GRPC_CALLS)));
  }
  log(
    `trial ${t + 1}/${TRIALS}: HTTP req/s direct ${Math.round(rps.direct[t]!)}, tunnel ${Math.round(rps.tunnel[t]!)}`,
  );
}

// ---- teardown: clients, then the agent, then the tunnel server; nothing may keep us alive ----
finished = true;
grpcFloor.close();
for (const p of paths) {
  greeter[p].close();
  await http[p].close();
}
child.stdin!.end();
await once(child, "exit");
await tunnels.close(1000);

const kube = await measureKubeList({ requests: KUBE_REQUESTS, trials: TRIALS, burst: 32, log });

// ---- report ----
type Pair = Record<Path, number>;
const stat = (pick: (p: Path) => number, digits: number): Pair => ({
  direct: round(pick("direct"), digits),
  tunnel: round(pick("tunnel"), digits),
});
const result = {
  http_rps: stat((p) => percentile(rps[p], 50), 0),
  http_p50_ms: stat((p) => percentile(httpMs[p], 50), 2),
  http_p99_ms: stat((p) => percentile(httpMs[p], 99), 2),
  grpc_unary_p50_us: stat((p) => percentile(grpcUs[p], 50), 1),
  grpc_unary_p99_us: stat((p) => percentile(grpcUs[p], 99), 1),
  grpc_unary_js_stream_floor_p50_us: round(percentile(grpcFloorUs, 50), 1),
  kube_list_ms: { direct: round(percentile(kube.direct, 50), 2), kas: round(percentile(kube.kas, 50), 2) },
  gitlab_auth_calls: kube.gitlabAuthCalls,
  kube_list_bare_proxies_ms: round(percentile(kube.bare, 50), 2),
};
const kubeP99 = { direct: round(percentile(kube.direct, 99), 2), tunnel: round(percentile(kube.kas, 99), 2) };
const ratio = (o: Pair) => round(o.tunnel / o.direct, 2);
// Judged on the unrounded figures.
const targets = {
  http_rps: percentile(rps.tunnel, 50) >= 0.6 * percentile(rps.direct, 50),
  // Issue 17: gRPC over the tunnel at the cost of a direct call.
  grpc_unary_p50_us: percentile(grpcUs.tunnel, 50) <= 1.2 * percentile(grpcUs.direct, 50),
  kube_list_ms: percentile(kube.kas, 50) <= 2 * percentile(kube.direct, 50),
  // Issue 27: kas's own work on top of what Node's HTTP stack costs for the same hops.
  kube_list_vs_floor: percentile(kube.kas, 50) <= 1.2 * percentile(kube.bare, 50),
  // One job token: one call per TTL period the run lasted, however many requests.
  gitlab_auth_calls: kube.gitlabAuthCalls <= Math.ceil(kube.elapsedMs / kube.ttlMs),
};

if (args.json) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  const row = (name: string, o: Pair, target: string) => [name, o.direct, o.tunnel, `${ratio(o)}x`, target];
  const met = (ok: boolean) => (ok ? "met" : "MISSED");
  console.log(
    markdownTable(
      ["metric", "direct", "tunnel", "tunnel/direct", "target"],
      [
        row(
          `HTTP GET requests/s (${CONCURRENCY} concurrent)`,
          result.http_rps,
          `>= 0.6x (${met(targets.http_rps)})`,
        ),
        row("HTTP GET p50 ms", result.http_p50_ms, "-"),
        row("HTTP GET p99 ms", result.http_p99_ms, "-"),
        row("gRPC unary p50 µs", result.grpc_unary_p50_us, `<= 1.2x (${met(targets.grpc_unary_p50_us)})`),
        row("gRPC unary p99 µs", result.grpc_unary_p99_us, "-"),
        row(
          "gRPC unary p50 µs (floor: HTTP/2 over a JS stream on plain TCP, no tunnel)",
          { direct: result.grpc_unary_p50_us.direct, tunnel: result.grpc_unary_js_stream_floor_p50_us },
          "-",
        ),
        row(
          "gRPC unary p50 µs (the tunnel against the floor: floor / tunnel)",
          { direct: result.grpc_unary_js_stream_floor_p50_us, tunnel: result.grpc_unary_p50_us.tunnel },
          "-",
        ),
        row(
          "kube list pods p50 ms (kas: CI job token)",
          { direct: result.kube_list_ms.direct, tunnel: result.kube_list_ms.kas },
          `<= 2x (${met(targets.kube_list_ms)})`,
        ),
        row("kube list pods p99 ms (kas: CI job token)", kubeP99, "-"),
        row(
          "kube list pods p50 ms (floor: two bare Node.js proxies, no tunnel)",
          { direct: result.kube_list_ms.direct, tunnel: result.kube_list_bare_proxies_ms },
          "-",
        ),
        row(
          "kube list pods p50 ms (kas against the floor: floor / kas)",
          { direct: result.kube_list_bare_proxies_ms, tunnel: result.kube_list_ms.kas },
          `<= 1.2x (${met(targets.kube_list_vs_floor)})`,
        ),
        [
          `GitLab authorization calls (kube run ${round(kube.elapsedMs / 1000, 0)} s, TTL ${kube.ttlMs / 1000} s)`,
          "-",
          kube.gitlabAuthCalls,
          "-",
          `<= 1 per TTL (${met(targets.gitlab_auth_calls)})`,
        ],
      ],
    ),
  );
  console.log(
    `\n${TRIALS} interleaved trials, each: ${REQUESTS} HTTP GETs (${CONCURRENCY} concurrent, 65 B JSON body) and ` +
      `${GRPC_CALLS} sequential gRPC calls per path (and over the JS-stream floor); requests/s is the median of trials, ` +
      `percentiles pool all samples; node ${process.version}, ${os.cpus().length} cores, loopback`,
  );
  console.log(
    `kube list: GET /api/v1/namespaces/default/pods (Table, 20 pods), ${KUBE_REQUESTS} sequential requests per path per trial, ` +
      `after a cold burst of 32 concurrent requests through kas; kas path: TLS, ci:42:<job token>, impersonated as gitlab:ci_job:1, agentk in the same process; ` +
      `floor: the same three HTTP hops through two bare Node.js proxies (node:https + undici, node:http + undici; no tunnel, no authorization): Node's HTTP stack alone`,
  );
  // Each trial runs both paths back to back: its ratio is the least disturbed by the neighbours.
  const paired = rps.tunnel.map((r, i) => r / rps.direct[i]!);
  console.log(
    `median of the per-trial HTTP requests/s ratios (tunnel/direct): ${round(percentile(paired, 50), 2)}x`,
  );
}
