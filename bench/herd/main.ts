// npm run bench:herd [-- --agents 10000 --json ...]
// A replica's worth of agents reconnecting at once: two kas replicas on one Redis behind haproxy
// (one haproxy per --agents-per-haproxy agents, for the open-files limit),
// the GitLab and Gitaly test servers, N agents with every module on (agents.ts, in processes of
// their own: agents-processes.ts) through haproxy, and a probe agent on replica 1 that Kubernetes
// API requests reach through replica 1's proxy. Once every agent is up and a baseline of probe
// requests is taken, replica 0 gets SIGKILL. Measured: how long until each of its agents is back
// (modules ready on a new tunnel), agents not back by the deadline, GitLab's agent_info and
// Gitaly's calls, and the probe's p99 during the herd against its p99 before it, in the same run;
// and the surviving replica's own side of it (replica-stats.ts: its longest event-loop delay, its
// CPU time and its garbage collections) and Redis's commands.
// BENCH_HERD_PROFILE=cpu: a CPU profile of the surviving replica over exactly the herd's window
// (bench/scale/probe.js preloaded into it), summarised on stderr; =cpu-baseline: over the baseline;
// =stalls: the surviving replica's event-loop stalls and GC pauses in both windows, which of the
// probe's slow requests fell in one, and the agents' processes' own stalls.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { AGENTK_KEEPALIVE_DEFAULT } from "../../cmd/agentk/config/index.ts";
import type { GitalyMethod } from "../../test/support/gitaly-server.ts";
import { PROJECT_INFO_PATH } from "../../test/support/gitlab-api.ts";
import { parseDuration } from "../../tool/config/values.ts";
import { benchArgs, envList } from "../lib/args.ts";
import { buildKas } from "../lib/kas-build.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { parseModules } from "../scale/agent-modules.ts";
import { logSelfTime } from "../scale/cpu-summary.ts";
import { probe as probeStep } from "../scale/measure.ts";
import { machineCpuSeconds } from "../scale/proc.ts";
import { AgentsProcesses } from "./agents-processes.ts";
import { PROBE_TOKEN, startHerdCluster } from "./cluster.ts";
import { startKubeProbe } from "./kube-probe.ts";
import { callsBetween, redisCalls } from "./redis-stats.ts";
import { ReplicaStats, type ReplicaWindow } from "./replica-stats.ts";

const { args, log } = benchArgs({
  agents: "10000",
  /** Seconds of probe requests before the kill: the baseline. */
  baseline: "15",
  /** Seconds after the kill by which every agent should be back (the target). */
  target: "60",
  /** Seconds after the kill after which an agent not back is given up on. */
  deadline: "120",
  /** kas's agent.info_cache_ttl. */
  "info-cache-ttl": "300s",
  concurrency: "10",
  "agents-per-project": "100",
  "probe-clients": "2",
  "probe-interval": "100",
  /** Modules each agent runs (bench/scale's --modules): all, none, or a comma list. */
  modules: "all",
  /**
   * The agents' process runs at this niceness (0: as kas). Real agents live on other machines;
   * here they share kas's cores, and at kas's priority their reconnect work would be kas's delay.
   */
  "agents-nice": "10",
  /**
   * Processes the agents are split over. One process stalls all its agents at once (its collector,
   * or the CPU its niceness leaves it), then they all speak at once; real agents do not.
   */
  "agents-processes": "1",
  /** kas's agent.listen.handshake_loop_utilization; 1 turns handshake pacing off. Default: kas's (0.5). */
  "handshake-loop-utilization": "",
  /**
   * Agents per haproxy: it holds two descriptors per agent and the open-files hard limit here is
   * 20,000, so more agents get more haproxies (agent i dials haproxy i % count), each in front of
   * both replicas, as a tier of balancers would be.
   */
  "agents-per-haproxy": "8000",
  /** Extra environment for both kas replicas, "NAME=value,NAME=value" (V8 flags in NODE_OPTIONS, say). */
  "kas-env": "",
  /**
   * CPUs for the replica that survives, all its threads (`taskset -a -p`, e.g. "0" or "0-3"), so that
   * nothing else of the bench runs on them when the bench itself is started on the others
   * (`taskset -c 1 npm run bench:herd -- --survivor-cpus 0`). Default: not pinned.
   */
  "survivor-cpus": "",
});
const KAS_ENV = envList(args["kas-env"]);
if (args["survivor-cpus"] && !/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(args["survivor-cpus"]))
  throw new Error(`--survivor-cpus: expected a CPU list such as 0 or 0-3,6, got ${args["survivor-cpus"]}`);
const N = Number(args.agents);
if (!(Number.isInteger(Number(args["agents-per-haproxy"])) && Number(args["agents-per-haproxy"]) > 0))
  throw new Error(`--agents-per-haproxy: expected a positive integer, got ${args["agents-per-haproxy"]}`);
if (!Number.isInteger(Number(args["agents-nice"])))
  throw new Error(`--agents-nice: expected an integer, got ${args["agents-nice"]}`);
const MODULES = parseModules(args.modules);
const AGENTS_PROCESSES = Number(args["agents-processes"]);
if (!(Number.isInteger(AGENTS_PROCESSES) && AGENTS_PROCESSES > 0))
  throw new Error(`--agents-processes: expected a positive integer, got ${args["agents-processes"]}`);
const TARGET_S = Number(args.target);
const METHODS: GitalyMethod[] = [
  "InfoRefsUploadPack",
  "FindCommit",
  "TreeEntry",
  "GetTreeEntries",
  "GetBlobs",
];
const PROFILE = process.env.BENCH_HERD_PROFILE;
if (PROFILE !== undefined && PROFILE !== "cpu" && PROFILE !== "cpu-baseline" && PROFILE !== "stalls")
  throw new Error(`BENCH_HERD_PROFILE: "cpu", "cpu-baseline" or "stalls", got ${PROFILE}`);
/** Stalls shorter than this are left out of the report (the probe's own requests take a few ms). */
const STALL_REPORT_MS = 50;
/** How soon after a stall of the agents' process ends a stall of kas's counts as following it, ms. */
const AGENT_STALL_LEAD_MS = 500;

const PROBE_JS = new URL("../scale/probe.js", import.meta.url).pathname;
const loadBefore = loadavg()[0]!;
const startedAt = new Date();
const dir = mkdtempSync(join(tmpdir(), "bench-herd-"));
log(
  `bench:herd, ${N} agents with ${MODULES.join(", ")}; load ${round(loadBefore, 2)} on ${cpus().length} cores`,
);
const cluster = await startHerdCluster({
  dir,
  kasEntry: buildKas(log),
  ...(args["handshake-loop-utilization"] && {
    handshakeLoopUtilization: args["handshake-loop-utilization"],
  }),
  agents: N,
  agentsPerProject: Number(args["agents-per-project"]),
  agentsPerHaproxy: Number(args["agents-per-haproxy"]),
  infoCacheTtl: args["info-cache-ttl"],
  log,
  kasEnv: KAS_ENV,
  ...(args["survivor-cpus"] && { survivorCpus: args["survivor-cpus"] }),
  ...(PROFILE && {
    survivorEnv: {
      // After any NODE_OPTIONS --kas-env gave both replicas.
      NODE_OPTIONS: `${KAS_ENV.NODE_OPTIONS ?? ""} --import ${PROBE_JS}`,
      BENCH_SCALE_PROBE_DIR: dir,
      BENCH_SCALE_PROFILE: PROFILE === "stalls" ? "stalls" : "cpu",
    },
  }),
});
let agents: AgentsProcesses | undefined;
// Interrupted: the replicas, haproxy and Redis go too (they would outlive the runner otherwise).
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    agents?.kill();
    void cluster.close().finally(() => process.exit(130));
  });
}
try {
  const t0 = performance.now();
  agents = new AgentsProcesses({
    plan: {
      urls: cluster.haproxies.map((h) => h.url),
      tokens: cluster.tokens,
      modules: [...MODULES],
      keepAliveIntervalMs: parseDuration(AGENTK_KEEPALIVE_DEFAULT),
      concurrency: Number(args.concurrency),
    },
    processes: AGENTS_PROCESSES,
    dir,
    nice: Number(args["agents-nice"]),
    verbose: !args.json,
    // With the stall trace, the agents' processes are traced too: does their own stalling bunch what kas gets?
    ...(PROFILE === "stalls" && { stallsProbe: PROBE_JS }),
  });
  const agentsProcs = agents;
  const report = () => agentsProcs.report();
  /** The agents' processes' stall traces: the baseline's files, then the herd's. */
  const agentStalls: string[][] = [];
  log(`  ${N} agents connecting through haproxy`);
  await agents.up(30 * 60_000);
  const upS = (performance.now() - t0) / 1000;
  const agentInfoBefore = cluster.gitlab.agentInfoRequests;
  log(
    `  all ${N} agents up with their modules in ${round(upS)} s; GitLab agent_info calls so far ${agentInfoBefore}`,
  );

  const survivor = cluster.kas[1]!;
  const redisAtStart = await redisCalls(cluster.redis.port);
  const stats = await ReplicaStats.start(`${survivor.addresses.observability}/metrics`, survivor.child.pid!);
  const probe = startKubeProbe({
    kubernetesApi: cluster.kas[1]!.addresses.kubernetesApi,
    token: PROBE_TOKEN,
    clients: Number(args["probe-clients"]),
    intervalMs: Number(args["probe-interval"]),
  });
  // The profiler, or the stall trace, starts.
  if (PROFILE === "cpu-baseline" || PROFILE === "stalls") await probeStep(survivor.child.pid!, dir, 0);
  if (PROFILE === "stalls") await agents.stallsStep(0);
  const baselineStart = performance.now();
  await sleep(Number(args.baseline) * 1000); // pacing: the baseline window is a length of time
  if (PROFILE === "cpu-baseline") await summariseProfile("the baseline");
  const onVictim = count(cluster.kas[0]!.out(), '"msg":"agent connected"');
  const gitalyBefore = Object.fromEntries(METHODS.map((m) => [m, cluster.gitaly.calls(m)]));
  const gitlabBefore = { agentInfo: cluster.gitlab.agentInfoRequests, projectInfo: projectInfo() };
  const baselineStats = await stats.window();
  const redisBefore = await redisCalls(cluster.redis.port);
  const redisBaseline = callsBetween(redisAtStart, redisBefore);
  if (PROFILE === "cpu") await probeStep(survivor.child.pid!, dir, 0); // the profiler starts
  if (PROFILE === "stalls") {
    await probeStep(survivor.child.pid!, dir, 1); // the baseline's stalls
    agentStalls.push(await agents.stallsStep(1));
  }
  // What else was busy during the herd: the processes playing the agents, and the whole machine.
  const agentsCpuBefore = agents.cpuSeconds();
  const machineBefore = machineCpuSeconds();
  agents.mark();
  const kill = performance.now();
  cluster.kas[0]!.child.kill("SIGKILL");
  log(`  SIGKILL to replica 0 (${onVictim} agent tunnels logged there); waiting for its agents`);
  let r = await report();
  while (performance.now() - kill < Number(args.deadline) * 1000) {
    if (r.lost > 0 && r.pending === 0 && r.up === N) break;
    await sleep(250); // polling the agents' process for its counts
    r = await report();
  }
  const herdEnd = performance.now();
  const herdStats = await stats.window();
  const herdS = (herdEnd - kill) / 1000;
  const agentsShare = (agents.cpuSeconds() - agentsCpuBefore) / herdS;
  const machineAfter = machineCpuSeconds();
  // /proc/stat counts every core: the share of one core is busy seconds per wall second.
  const machineShare = (machineAfter.busy - machineBefore.busy) / herdS;
  const redisDuring = callsBetween(redisBefore, await redisCalls(cluster.redis.port));
  if (PROFILE === "cpu") await summariseProfile("the herd");
  if (PROFILE === "stalls") {
    await probeStep(survivor.child.pid!, dir, 2); // the herd's
    agentStalls.push(await agents.stallsStep(2));
  }
  await probe.stop();
  const before = probe.samples.filter((s) => s.at < kill);
  const during = probe.samples.filter((s) => s.at >= kill && s.at <= herdEnd);
  const gitaly = Object.fromEntries(METHODS.map((m) => [m, cluster.gitaly.calls(m) - gitalyBefore[m]!]));
  const gitalyDuring = Object.values(gitaly).reduce((a, b) => a + b, 0);
  const agentInfoDuring = cluster.gitlab.agentInfoRequests - gitlabBefore.agentInfo;
  const elapsedS = (performance.now() - t0) / 1000;
  const ttlS = parseDuration(args["info-cache-ttl"]) / 1000;
  const allowedAgentInfo = N * Math.ceil(elapsedS / ttlS);
  const givenUp = N - r.up;
  const s = (ms: number) => round(ms / 1000, 2);
  const p = (xs: number[], q: number) => (xs.length ? percentile(xs, q) : Number.NaN);
  const p99Before = p(
    before.map((x) => x.ms),
    99,
  );
  const p99During = p(
    during.map((x) => x.ms),
    99,
  );
  // Window 1 is the baseline, 2 the herd: the survivor's trace and the agents' processes'.
  const traced = (seq: 1 | 2, samples: typeof before, from: number, to: number) =>
    traceStalls(
      readStalls([join(dir, `stalls-${seq}.json`)]),
      samples,
      3 * p99Before,
      from,
      to,
      readStalls(agentStalls[seq - 1]!),
    );
  const stallTrace =
    PROFILE === "stalls"
      ? { baseline: traced(1, before, baselineStart, kill), herd: traced(2, during, kill, herdEnd) }
      : undefined;
  const result = {
    date: startedAt.toISOString(),
    agents: N,
    load_before: round(loadBefore, 2),
    load_after: round(loadavg()[0]!, 2),
    first_up_s: round(upS),
    lost: r.lost,
    back: r.backMs.length,
    back_s: { p50: s(p(r.backMs, 50)), p99: s(p(r.backMs, 99)), max: s(Math.max(...r.backMs)) },
    tunnel_back_s: {
      p50: s(p(r.tunnelBackMs, 50)),
      p99: s(p(r.tunnelBackMs, 99)),
      max: s(Math.max(...r.tunnelBackMs)),
    },
    given_up: givenUp,
    module_failures: r.moduleFailures,
    ...(r.firstError && { first_module_error: r.firstError }),
    agent_info: {
      before_kill: gitlabBefore.agentInfo,
      during_herd: agentInfoDuring,
      total: cluster.gitlab.agentInfoRequests,
      allowed: allowedAgentInfo,
    },
    project_info_during_herd: projectInfo() - gitlabBefore.projectInfo,
    gitaly_during_herd: {
      total: gitalyDuring,
      by_method: gitaly,
      configuration_projects: cluster.configProjects,
    },
    kube_p99_ms: {
      before: round(p99Before),
      during: round(p99During),
      ratio: round(p99During / p99Before, 2),
    },
    kube_p50_ms: {
      before: round(
        p(
          before.map((x) => x.ms),
          50,
        ),
      ),
      during: round(
        p(
          during.map((x) => x.ms),
          50,
        ),
      ),
    },
    survivor: {
      loop_delay_max_ms: {
        before: round(baselineStats.loopDelayMaxMs),
        during: round(herdStats.loopDelayMaxMs),
      },
      cpu_share: { before: round(baselineStats.cpuShare, 2), during: round(herdStats.cpuShare, 2) },
      cpu_ms_per_agent_back: round((herdStats.cpuSeconds * 1000) / Math.max(1, r.backMs.length), 2),
      handshakes_refused_during: herdStats.refused,
      handshake_capacity_per_s: {
        before: round(baselineStats.capacityPerSecond),
        after: round(herdStats.capacityPerSecond),
      },
      gc_before: gcSummary(baselineStats),
      gc_during: gcSummary(herdStats),
    },
    /** Cores busy during the herd: the agents' process, and the whole machine (of its cores). */
    during_herd_cores_busy: {
      agents_process: round(agentsShare, 2),
      machine: round(machineShare, 2),
      machine_cores: cpus().length,
    },
    redis_commands: {
      baseline: Object.fromEntries(redisBaseline),
      during_herd: Object.fromEntries(redisDuring),
    },
    kube_requests: {
      before: before.length,
      during: during.length,
      failed_during: during.filter((x) => !x.ok).length,
    },
    ...(stallTrace && { stall_trace: stallTrace }),
  };
  if (args.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else {
    const ok = (b: boolean) => (b ? "ok" : "MISSED");
    // Every lost agent back, the last within the target (none back is no pass).
    const maxS =
      r.backMs.length === r.lost && r.lost > 0 ? Math.max(...r.backMs) / 1000 : Number.POSITIVE_INFINITY;
    console.log(
      markdownTable(
        ["metric", "measured", "target"],
        [
          ["agents lost with replica 0", r.lost, "-"],
          [
            "back: p50 / p99 / max s",
            `${result.back_s.p50} / ${result.back_s.p99} / ${result.back_s.max}`,
            `max <= ${TARGET_S} s: ${ok(maxS <= TARGET_S)}`,
          ],
          [
            "tunnel up again: p50 / p99 / max s",
            `${result.tunnel_back_s.p50} / ${result.tunnel_back_s.p99} / ${result.tunnel_back_s.max}`,
            "-",
          ],
          [`agents given up on (not back in ${args.deadline} s)`, givenUp, `0: ${ok(givenUp === 0)}`],
          ["GitLab agent_info calls during the herd", agentInfoDuring, "-"],
          [
            `GitLab agent_info calls in all (${round(elapsedS, 0)} s, TTL ${ttlS} s)`,
            cluster.gitlab.agentInfoRequests,
            `<= ${allowedAgentInfo}: ${ok(cluster.gitlab.agentInfoRequests <= allowedAgentInfo)}`,
          ],
          ["GitLab project_info calls during the herd", result.project_info_during_herd, "-"],
          [
            `Gitaly calls during the herd (${cluster.configProjects} configuration projects + 1 manifest project)`,
            gitalyDuring,
            `<= ${cluster.configProjects + 1}: ${ok(gitalyDuring <= cluster.configProjects + 1)}`,
          ],
          [
            "kube API p99 ms before / during the herd",
            `${result.kube_p99_ms.before} / ${result.kube_p99_ms.during} (${result.kube_p99_ms.ratio}x)`,
            `<= 3x: ${ok(result.kube_p99_ms.ratio <= 3)}`,
          ],
          [
            "kube API p50 ms before / during",
            `${result.kube_p50_ms.before} / ${result.kube_p50_ms.during}`,
            "-",
          ],
          [
            "surviving replica: longest event-loop delay ms before / during",
            `${result.survivor.loop_delay_max_ms.before} / ${result.survivor.loop_delay_max_ms.during}`,
            "-",
          ],
          [
            "surviving replica: CPU, cores busy before / during",
            `${result.survivor.cpu_share.before} / ${result.survivor.cpu_share.during}`,
            "-",
          ],
          [
            "surviving replica: CPU ms per agent back (the herd's CPU time / agents back)",
            result.survivor.cpu_ms_per_agent_back,
            "-",
          ],
          [
            "surviving replica: handshakes refused at its pending limit during the herd, given a place / flat 1 s",
            `${result.survivor.handshakes_refused_during.scheduled} / ${result.survivor.handshakes_refused_during.flat}`,
            "-",
          ],
          [
            "surviving replica: handshakes/s its pacer measured, before / after the herd",
            `${result.survivor.handshake_capacity_per_s.before} / ${result.survivor.handshake_capacity_per_s.after}`,
            "-",
          ],
          [
            "surviving replica: GC, share of its CPU time before / during",
            `${result.survivor.gc_before.share_of_cpu} / ${result.survivor.gc_during.share_of_cpu}`,
            "-",
          ],
          [
            "surviving replica during the herd: mark-compact pauses n, total ms, >= 100 ms / scavenges n, total ms, >= 100 ms / incremental marking ms",
            `${gcRow(result.survivor.gc_during.major)} / ${gcRow(result.survivor.gc_during.minor)} / ${result.survivor.gc_during.incremental.ms}`,
            "-",
          ],
          [
            "during the herd, cores busy: the agents' processes / the whole machine (of its cores)",
            `${result.during_herd_cores_busy.agents_process} / ${result.during_herd_cores_busy.machine} (of ${result.during_herd_cores_busy.machine_cores})`,
            "-",
          ],
          [
            "kube API requests before / during (failed)",
            `${before.length} / ${during.length} (${result.kube_requests.failed_during})`,
            "-",
          ],
        ],
      ),
    );
    console.log(
      `\nGitaly calls during the herd by method: ${Object.entries(gitaly)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}. ` +
        `Module first exchanges that failed and were retried: ${r.moduleFailures}${r.firstError ? ` (first: ${r.firstError})` : ""}. ` +
        `Redis commands in the ${args.baseline} s baseline: ${redisBaseline.map(([k, v]) => `${k} ${v}`).join(", ")}; ` +
        `during the herd: ${redisDuring.map(([k, v]) => `${k} ${v}`).join(", ")}. ` +
        `All ${N} agents first came up in ${round(upS)} s (GitLab agent_info calls then: ${agentInfoBefore}). ` +
        `Load average ${round(loadBefore, 2)} before, ${result.load_after} after.`,
    );
    if (stallTrace) {
      for (const [window, t] of Object.entries(stallTrace))
        console.log(
          `\nThe surviving replica's stalls (${window}): ${t.stalls} of ${STALL_REPORT_MS} ms or more, ` +
            `${t.stalls_over_100ms} of 100 ms or more, the longest ${t.longest_ms} ms, ${t.stall_ms} ms in all, ` +
            `${t.gc_in_stalls_ms} ms of it in GC pauses (${t.gc_pauses_over_50ms} pauses of 50 ms or more, the longest ${t.longest_gc_ms} ms); ` +
            `probe requests slower than 3x the baseline's p99 (${round(3 * p99Before)} ms): ${t.slow}, ` +
            `${t.slow_in_stall} of them while the replica stalled, ${t.slow_in_gc} during a GC pause of ${STALL_REPORT_MS} ms or more. ` +
            `The longest stalls (s into the window: ms, of it GC): ${t.longest.map((x) => `${x.at_s}: ${x.ms} (${x.gc_ms})`).join(", ")}. ` +
            `The agents' processes stalled ${t.agents_process.stalls} times for ${STALL_REPORT_MS} ms or more (${t.agents_process.stalls_over_100ms} of 100 ms or more, ` +
            `the longest ${t.agents_process.longest_ms} ms, ${t.agents_process.stall_ms} ms in all, ${t.agents_process.gc_in_stalls_ms} ms of it in GC pauses); ` +
            `${t.over_100ms_after_agents_stall} of the replica's ${t.stalls_over_100ms} stalls of 100 ms or more began within ${AGENT_STALL_LEAD_MS} ms after one of the agents' processes' ended ` +
            `(by chance: ${Math.round(t.after_agents_stall_share * 100)} % of the window is that soon after one).`,
        );
    }
  }
} finally {
  agents?.kill();
  await cluster.close();
  rmSync(dir, { recursive: true, force: true });
}

interface StallLog {
  loop: { end: number; ms: number }[];
  gc: { start: number; ms: number; kind: number }[];
}

/** The stall traces in `files`, one log (the agents' processes' together). */
function readStalls(files: string[]): StallLog {
  const logs = files.map((f) => JSON.parse(readFileSync(f, "utf8")) as StallLog);
  return { loop: logs.flatMap((l) => l.loop), gc: logs.flatMap((l) => l.gc) };
}

/**
 * The surviving replica's loop stalls and GC pauses in a window (epoch ms, from probe.js), and which
 * of the probe's samples slower than `slowMs` overlapped one (the probe's times are this process's
 * performance.now(): both clocks are turned to epoch ms).
 */
function traceStalls(
  log: StallLog,
  samples: { at: number; ms: number }[],
  slowMs: number,
  from: number,
  to: number,
  agentsLog: StallLog,
) {
  const long = (l: StallLog) =>
    l.loop.filter((x) => x.ms >= STALL_REPORT_MS).map((x) => ({ from: x.end - x.ms, to: x.end }));
  const stalls = long(log);
  const agentStalls = long(agentsLog);
  // A stall of the agents' process holds back what its agents send; kas gets it all when it ends.
  const afterAgentStall = (s: { from: number; to: number }) =>
    agentStalls.some((a) => a.to >= s.from - AGENT_STALL_LEAD_MS && a.to <= s.to);
  // What chance alone gives: the share of the window's moments that follow the end of one by at most the lead.
  const window = { from: performance.timeOrigin + from, to: performance.timeOrigin + to };
  let covered = 0;
  let reach = Number.NEGATIVE_INFINITY;
  for (const a of [...agentStalls].sort((x, y) => x.to - y.to)) {
    const start = Math.max(a.to, reach, window.from);
    const end = Math.min(a.to + AGENT_STALL_LEAD_MS, window.to);
    if (end > start) covered += end - start;
    reach = Math.max(reach, a.to + AGENT_STALL_LEAD_MS);
  }
  const pauses = log.gc.map((g) => ({ from: g.start, to: g.start + g.ms }));
  const overlaps = (a: { from: number; to: number }, b: { from: number; to: number }) =>
    a.from < b.to && b.from < a.to;
  const slow = samples
    .filter((x) => x.ms > slowMs)
    .map((x) => ({ from: performance.timeOrigin + x.at, to: performance.timeOrigin + x.at + x.ms }));
  return {
    stalls: stalls.length,
    stalls_over_100ms: stalls.filter((x) => x.to - x.from >= 100).length,
    longest_ms: round(Math.max(0, ...stalls.map((x) => x.to - x.from))),
    stall_ms: round(stalls.reduce((sum, x) => sum + x.to - x.from, 0)),
    gc_in_stalls_ms: round(gcInside(log, stalls)),
    gc_pauses_over_50ms: log.gc.filter((g) => g.ms >= 50).length,
    longest_gc_ms: round(Math.max(0, ...log.gc.map((g) => g.ms))),
    agents_process: {
      stalls: agentStalls.length,
      stalls_over_100ms: agentStalls.filter((x) => x.to - x.from >= 100).length,
      longest_ms: round(Math.max(0, ...agentStalls.map((x) => x.to - x.from))),
      stall_ms: round(agentStalls.reduce((sum, x) => sum + x.to - x.from, 0)),
      gc_in_stalls_ms: round(gcInside(agentsLog, agentStalls)),
    },
    /** The replica's stalls of 100 ms or more that began within AGENT_STALL_LEAD_MS after one of the agents' process ended. */
    over_100ms_after_agents_stall: stalls.filter((x) => x.to - x.from >= 100 && afterAgentStall(x)).length,
    /** The share of the window within AGENT_STALL_LEAD_MS after a stall of the agents' process ended: chance's rate. */
    after_agents_stall_share: round(covered / Math.max(1, window.to - window.from), 2),
    slow: slow.length,
    slow_in_stall: slow.filter((x) => stalls.some((s) => overlaps(x, s))).length,
    slow_in_gc: slow.filter((x) => pauses.some((g) => g.to - g.from >= STALL_REPORT_MS && overlaps(x, g)))
      .length,
    /** The longest stalls: when (s after the window's start), how long, and how much of it GC. */
    longest: [...stalls]
      .sort((a, b) => b.to - b.from - (a.to - a.from))
      .slice(0, 8)
      .map((x) => ({
        at_s: round((x.from - (performance.timeOrigin + from)) / 1000, 2),
        ms: round(x.to - x.from),
        gc_ms: round(gcInside(log, [x])),
      })),
  };
}

/** How much of `stalls` the process spent in its GC pauses, ms. */
function gcInside(log: StallLog, stalls: { from: number; to: number }[]): number {
  const pauses = log.gc.map((g) => ({ from: g.start, to: g.start + g.ms }));
  return stalls.reduce(
    (sum, s) =>
      sum + pauses.reduce((t, g) => t + Math.max(0, Math.min(g.to, s.to) - Math.max(g.from, s.from)), 0),
    0,
  );
}

/** A window's collections in ms, and their share of the replica's CPU time in it. */
function gcSummary(w: ReplicaWindow) {
  const kinds = Object.entries(w.gc) as [keyof ReplicaWindow["gc"], ReplicaWindow["gc"]["major"]][];
  const total = kinds.reduce((sum, [, g]) => sum + g.seconds, 0);
  const of = (k: keyof ReplicaWindow["gc"]) => ({
    count: w.gc[k].count,
    ms: round(w.gc[k].seconds * 1000),
    over_100ms: w.gc[k].over100ms,
  });
  return {
    major: of("major"),
    minor: of("minor"),
    incremental: of("incremental"),
    weakcb: of("weakcb"),
    share_of_cpu: round(total / Math.max(w.cpuSeconds, 1e-9), 2),
  };
}

function gcRow(g: { count: number; ms: number; over_100ms: number }): string {
  return `${g.count}, ${g.ms}, ${g.over_100ms}`;
}

/** Stops the surviving replica's profiler (cpu-1.cpuprofile), keeps the profile and prints where its time went. */
async function summariseProfile(window: string): Promise<void> {
  const survivor = cluster.kas[1]!;
  await probeStep(survivor.child.pid!, dir, 1);
  // Kept past the run (its folder goes), for a closer look in DevTools or speedscope.
  const kept = join(tmpdir(), `bench-herd-${startedAt.toISOString().replace(/[:.]/g, "-")}.cpuprofile`);
  copyFileSync(join(dir, "cpu-1.cpuprofile"), kept);
  log(`  the surviving replica's CPU profile over ${window}: ${kept}`);
  logSelfTime(log, kept, `surviving replica over ${window}:`, 25);
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

function projectInfo(): number {
  return cluster.gitlab.requests.filter((r) => r.path === PROJECT_INFO_PATH).length;
}
