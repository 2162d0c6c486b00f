// npm run bench:scale [-- --json] [-- --agents 1000,5000 --settle 5 --idle-settle 60 --window S --agent-keepalive MS]
//   [-- --modules all|none|configuration,tracker,views,gitops [--breakdown ends|full]] [-- --rounds R]
//   [-- --kas-env NAME=value,...]
// --modules: each agent also speaks what agentk's modules speak (agent-modules.ts); one run per
// module added in turn (tunnels only, + configuration, + tracker, ...), kas's heap after a forced
// full collection with each: the per-module breakdown (modules-mode.ts); --breakdown ends: only
// the tunnel-only row and the row with every module (before/after pairs in half the time); full:
// only the row with every module.
// --rounds R: memory that comes back (rounds.ts): R rounds of N agents connecting and leaving (half
// cleanly, half cut) on one kas, its heap after a forced full collection after each.
// The agents ping as agentk does (--keepalive-interval's default, 55 s), and the CPU window defaults
// to one such period, so that every tunnel's pings fall in it exactly once.
// kas's footprint with many idle agents: for each N, a fresh kas (the build, dist/cmd/kas/main.js, single replica,
// static tokens file with N distinct agents), its RSS before any agent and with N idle tunnels held
// by one load process (agents.ts), and its CPU over a window while they sit idle.
// BENCH_SCALE_PROFILE=memory|snapshot also reports where kas's memory per tunnel goes (probe.js);
// =cpu a V8 CPU profile of the idle window, =cpu-connect one of the agents' arrival, =perf Linux perf
// samples of the idle window (all threads, needs perf).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { AGENTK_KEEPALIVE_DEFAULT } from "../../cmd/agentk/config/index.ts";
import { parseDuration } from "../../tool/config/values.ts";
import { benchArgs, envList } from "../lib/args.ts";
import { buildKas } from "../lib/kas-build.ts";
import { markdownTable, round } from "../lib/stats.ts";
import { parseModules } from "./agent-modules.ts";
import { logSelfTime } from "./cpu-summary.ts";
import { growthPerAgent } from "./heap-summary.ts";
import { type Measurement, type MemoryProbe, measure, type Profile } from "./measure.ts";
import { modulesMode } from "./modules-mode.ts";
import { roundsMode } from "./rounds-mode.ts";

const AGENTK_KEEPALIVE_MS = parseDuration(AGENTK_KEEPALIVE_DEFAULT);
const { args, log } = benchArgs({
  agents: "1000,5000",
  settle: "5",
  // After the agents connected: V8 runs a few full collections some 35 s after the connection
  // storm's allocation stops (its memory reducer; --trace-gc at 19,500 agents showed three
  // mark-compacts at +36 s). They are the storm's cost, not idleness': the window starts later.
  // With 5 s, 19,500 agents measured 4.0-4.2 % of a core, with 60 s 2.1 %, in the same hour.
  "idle-settle": "60",
  window: String(AGENTK_KEEPALIVE_MS / 1000),
  concurrency: "64",
  // The agents' keepalive interval in ms (0: off); default agentk's.
  "agent-keepalive": String(AGENTK_KEEPALIVE_MS),
  modules: "none",
  rounds: "0",
  // --modules: "ends" runs only the tunnel-only row and the row with every module asked for; "full"
  // only the latter.
  breakdown: "modules",
  // Extra environment for kas, "NAME=value,NAME=value" (e.g. malloc settings to compare).
  "kas-env": "",
});
const MODULES = parseModules(args.modules);
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 0)
  throw new Error(`--rounds: expected a count, got ${args.rounds}`);
const COUNTS = args.agents.split(",").map(Number);
const TARGET_KIB = 16; // the performance issue: 20,000 agents at <= 16 KiB each, < 2 % of a core
const TARGET_CPU_PCT = 2;
const profile = process.env.BENCH_SCALE_PROFILE;
const PROFILES = ["memory", "heap", "snapshot", "cpu", "cpu-connect", "perf"] as const;
if (profile !== undefined && !(PROFILES as readonly string[]).includes(profile)) {
  throw new Error(
    `BENCH_SCALE_PROFILE must be one of ${PROFILES.join(", ")}, got ${JSON.stringify(profile)}`,
  );
}
if (profile) log(`BENCH_SCALE_PROFILE=${profile}: profiling perturbs the RSS and CPU figures of this run`);

// kas and the load process each hold one socket per agent (Node raises its soft limit to the hard one).
const hardFds = Number(/^Max open files\s+\S+\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1]);
const largest = Math.max(...COUNTS);
if (Number.isFinite(hardFds) && hardFds < largest + 200) {
  throw new Error(
    `open-files hard limit ${hardFds} is too low for ${largest} agents (needs > ${largest + 200})`,
  );
}

const kasEntry = buildKas(log);
const common = {
  kasEntry,
  settleMs: Number(args.settle) * 1000,
  idleSettleMs: Number(args["idle-settle"]) * 1000,
  windowMs: Number(args.window) * 1000,
  concurrency: Number(args.concurrency),
  agentKeepAliveMs: Number(args["agent-keepalive"]),
  kasEnv: envList(args["kas-env"]),
  log,
};
if (ROUNDS > 0) {
  await roundsMode({
    ...common,
    counts: COUNTS,
    rounds: ROUNDS,
    modules: MODULES,
    json: args.json,
    snapshots: profile === "snapshot",
  });
  process.exit(0);
}
if (MODULES.length > 0) {
  await modulesMode({
    ...common,
    counts: COUNTS,
    modules: MODULES,
    profile: profile as Profile | undefined,
    json: args.json,
    endsOnly: args.breakdown === "ends",
    fullOnly: args.breakdown === "full",
  });
  process.exit(0);
}

const results: Measurement[] = [];
for (const agents of COUNTS) {
  log(`N = ${agents}`);
  const m = await measure({
    agents,
    kasEntry,
    settleMs: Number(args.settle) * 1000,
    idleSettleMs: Number(args["idle-settle"]) * 1000,
    windowMs: Number(args.window) * 1000,
    concurrency: Number(args.concurrency),
    agentKeepAliveMs: Number(args["agent-keepalive"]),
    profile: profile as Profile | undefined,
    log,
  });
  log(
    `  kas fds ${m.kasFds}; a /metrics scrape ${round(m.scrapeMs)} ms; anonymous memory per agent ${round(m.anonPerAgentKiB)} KiB; ` +
      `load process RSS per agent ${round(m.loadRssPerAgentKiB)} KiB; kas CPU per agent arriving ${round(m.connectCpuMsPerAgent, 2)} ms; ` +
      `kas exit code ${m.kasExitCode}`,
  );
  const threads = m.threads.map((t) => `${t.thread} ${round(t.userPct, 2)}+${round(t.systemPct, 2)}`);
  log(`  idle CPU before any agent: ${round(m.baselineCpuPct, 2)} %`);
  log(`  idle CPU by thread, % user+system: ${threads.join(", ") || "none"}`);
  if (m.profile) report(m);
  results.push(m);
}

const last = results.at(-1)!;
if (args.json) {
  process.stdout.write(
    `${JSON.stringify({ agents: last.agents, rss_per_agent_kib: round(last.rssPerAgentKiB), idle_cpu_pct: round(last.idleCpuPct, 2) })}\n`,
  );
} else {
  const mib = (kib: number) => round(kib / 1024);
  const verdict = (m: Measurement) => {
    const mem = m.rssPerAgentKiB <= TARGET_KIB ? "ok" : "MISSED";
    const cpu = m.idleCpuPct < TARGET_CPU_PCT ? "ok" : "MISSED";
    return `<= ${TARGET_KIB} KiB/agent: ${mem}; < ${TARGET_CPU_PCT} % CPU: ${cpu}`;
  };
  console.log(
    markdownTable(
      [
        "N",
        "kas RSS baseline MiB",
        "kas RSS with N agents MiB",
        "RSS per agent KiB",
        "idle CPU % of one core",
        "target",
      ],
      results.map((m) => [
        m.agents,
        mib(m.rssBaselineKiB),
        mib(m.rssLoadedKiB),
        round(m.rssPerAgentKiB),
        round(m.idleCpuPct, 2),
        verdict(m),
      ]),
    ),
  );
}

/** kas's own view of where its memory or idle CPU goes (stderr). */
function report(m: Measurement): void {
  if (m.profile!.cpu) logSelfTime(log, m.profile!.cpu, profile === "cpu-connect" ? "arrival" : "idle window");
  if (m.profile!.perf) {
    const out = execFileSync(
      "perf",
      ["report", "-i", m.profile!.perf, "--stdio", "--no-children", "--sort", "dso,sym", "-g", "none"],
      {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
        maxBuffer: 64 << 20,
      },
    );
    log("  idle window perf samples, self, all threads:");
    for (const line of out
      .split("\n")
      .filter((l) => /^\s+\d/.test(l))
      .slice(0, 30))
      log(`  ${line}`);
  }
  if (m.profile!.memory) memoryReport(m, ...m.profile!.memory);
  log(`  profile files in ${m.dir}`);
}

function memoryReport(m: Measurement, before: MemoryProbe, after: MemoryProbe): void {
  const per = (a: number, b: number) => `${round((b - a) / 1024 / m.agents, 2)} KiB`;
  const keys = ["rss", "heapTotal", "heapUsed", "external", "arrayBuffers"] as const;
  log(
    `  per agent (process.memoryUsage): ${keys.map((k) => `${k} ${per(before.usage[k], after.usage[k])}`).join(", ")}`,
  );
  const spaces = after.spaces.map((s) => {
    const was = before.spaces.find((x) => x.space_name === s.space_name)?.space_used_size ?? 0;
    return `${s.space_name} ${per(was, s.space_used_size)}`;
  });
  log(`  per agent (V8 heap spaces, used): ${spaces.join(", ")}`);
  if (m.profile!.snapshots) {
    log("  per agent (heap snapshot, self size growth by type:constructor):");
    for (const g of growthPerAgent(...m.profile!.snapshots, m.agents)) {
      log(
        `    ${String(Math.round(g.bytesPerAgent)).padStart(7)} B  x${round(g.countPerAgent, 2)}  ${g.key}`,
      );
    }
  }
}
