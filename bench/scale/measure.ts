// One measurement: a fresh kas, its RSS before any agent, then with N idle agents connected
// (held by one load process), and its CPU over a window while they sit idle.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { portsEnv, spawnKas } from "../../test/kas/support/kas-process.ts";
import type { ModuleName } from "./agent-modules.ts";
import { cpuSeconds, openFds, rssKiB, smapsRollupKiB, threadCpuSeconds } from "./proc.ts";
import type { AgentsPlan, AgentsReport } from "./protocol.ts";

export interface MeasureOptions {
  agents: number;
  /** kas's compiled entry point (dist/cmd/kas/main.js): what operators run, without a TypeScript loader. */
  kasEntry: string;
  /** Idle time before each RSS reading. */
  settleMs: number;
  /**
   * Idle time after the agents connected, before the idle window: longer than `settleMs` so that
   * the garbage collections V8 runs once after the connection storm (its memory reducer, some
   * 35 s after allocation slows) are over. Default: settleMs.
   */
  idleSettleMs?: number;
  /** CPU sampling window. */
  windowMs: number;
  /** Handshakes in flight at once from the load process. */
  concurrency: number;
  /** The agents' keepalive interval (0: off). */
  agentKeepAliveMs: number;
  /**
   * "memory": process.memoryUsage() from inside kas; "heap": the same after a forced full
   * collection (retained memory only); "snapshot": heap snapshots as well; "cpu": a CPU profile of
   * the idle window; "cpu-connect": one of the agents' arrival (tunnels up to modules' first exchange).
   */
  profile?: Profile | undefined;
  log: (line: string) => void;
  /** Extra fields of agent i's static token entry (e.g. `repository`, its configuration project). */
  tokenFields?: (i: number) => Record<string, unknown>;
  /** Extra kas environment (settings). */
  kasEnv?: Record<string, string>;
  /** Each agent also holds a GetConfiguration stream (bench:config); the load process waits this long for them. */
  configurationStreamsTimeoutMs?: number;
  /** Each agent also runs these modules (agent-modules.ts); the load process waits `modulesTimeoutMs` for them. */
  modules?: ModuleName[];
  modulesTimeoutMs?: number;
  /** CPU window before any agent connects. Default: windowMs. */
  baselineWindowMs?: number;
}

export interface Measurement {
  agents: number;
  rssBaselineKiB: number;
  rssLoadedKiB: number;
  rssPerAgentKiB: number;
  idleCpuPct: number;
  /** Idle CPU before any agent connected, same window. */
  baselineCpuPct: number;
  /** The idle window's CPU by thread, % of one core. */
  threads: ThreadCpu[];
  /** smaps_rollup Anonymous growth per agent (heap + buffers, without file-backed pages). */
  anonPerAgentKiB: number;
  kasFds: number;
  /** A Prometheus scrape of kas's /metrics with the N agents up, ms (median of 5): the loop waits on it. */
  scrapeMs: number;
  loadRssPerAgentKiB: number;
  connectSeconds: number;
  /** kas's CPU time (all threads) while the agents arrived, ms per agent: tunnels up, and their modules' first exchange. */
  connectCpuMsPerAgent: number;
  kasExitCode: number | null;
  /** With configuration streams: agents that got their first configuration, and how long all took. */
  configured?: number;
  configuredSeconds?: number;
  /** Profiling output, when asked for. */
  profile?: {
    memory?: [MemoryProbe, MemoryProbe];
    snapshots?: [string, string];
    cpu?: string;
    perf?: string;
  };
  dir: string;
}

export interface ThreadCpu {
  thread: string;
  userPct: number;
  systemPct: number;
}

export type Profile = "memory" | "heap" | "snapshot" | "cpu" | "cpu-connect" | "perf";

export interface MemoryProbe {
  usage: NodeJS.MemoryUsage;
  spaces: Array<{ space_name: string; space_used_size: number; space_size: number }>;
}

const AGENTS_MAIN = new URL("./agents.ts", import.meta.url).pathname;
const PROBE = new URL("./probe.js", import.meta.url).pathname;

export async function measure(o: MeasureOptions): Promise<Measurement> {
  const dir = mkdtempSync(join(tmpdir(), "bench-scale-"));
  const { tokens, env } = await kasSetup(o, dir);
  // A shared machine under load can take a while to start kas.
  const kas = await spawnKas(env, { entry: o.kasEntry, timeoutMs: 60_000 });
  const pid = kas.child.pid!;
  let load: ReturnType<typeof spawn> | undefined;
  try {
    o.log(`  kas pid ${pid} up; settling ${o.settleMs} ms for the baseline`);
    await sleep(o.settleMs);
    // CPU first: the RSS reading then comes after settle + window, as startup garbage has had time to go.
    const baselineCpuPct = await cpuPct(pid, o.baselineWindowMs ?? o.windowMs);
    const rssBaselineKiB = rssKiB(pid);
    const anonBaseline = smapsRollupKiB(pid).Anonymous ?? 0;
    const memory = o.profile === "memory" || o.profile === "heap" || o.profile === "snapshot";
    const probes: MemoryProbe[] = [];
    if (memory) probes.push(await probeMemory(pid, dir, 0));

    if (o.profile === "cpu-connect") await probe(pid, dir, 0); // starts the profiler
    const arrivalCpu0 = cpuSeconds(pid);
    load = spawnLoad(o, dir, kas.addresses.agent, tokens);
    const report = await loadReport(o, load);
    const connectCpuMsPerAgent = ((cpuSeconds(pid) - arrivalCpu0) * 1000) / o.agents;
    if (o.profile === "cpu-connect") await probe(pid, dir, 1); // writes cpu-1.cpuprofile
    const metrics = `${kas.addresses.observability}/metrics`;
    await waitForGauge(metrics, "kas_connected_agents", o.agents, 30_000);
    const idleSettleMs = o.idleSettleMs ?? o.settleMs;
    o.log(`  kas /metrics: kas_connected_agents ${o.agents}; settling ${idleSettleMs} ms`);

    await sleep(idleSettleMs);
    const rssLoadedKiB = rssKiB(pid);
    const anonLoaded = smapsRollupKiB(pid).Anonymous ?? 0;
    const loadRssKiB = rssKiB(load.pid!);
    const kasFds = openFds(pid);
    const { idleCpuPct, threads } = await idleWindow(o, pid, dir);
    const scrapeMs = await scrapeTime(metrics);
    // Still all there after the window (none dropped by keepalive).
    await waitForGauge(metrics, "kas_connected_agents", o.agents, 5_000);
    if (agentModules(o).includes("configuration")) {
      await waitForGauge(metrics, "kas_agent_configuration_streams", o.agents, 5_000);
    }
    if (memory) probes.push(await probeMemory(pid, dir, 1));

    load.kill("SIGTERM");
    // The agents leave cleanly; 10,000 of them with modules can take longer than that on a busy
    // machine: what was measured is kept, the rest are cut.
    const exited = once(load, "exit");
    await deadline(exited, 15_000, "the load process did not exit").catch(() => {
      o.log("  the load process did not exit within 15 s of SIGTERM: killed");
      load?.kill("SIGKILL");
      return exited;
    });
    kas.child.kill("SIGTERM");
    const kasExitCode = await kas.exitCode(40_000);
    return {
      agents: o.agents,
      rssBaselineKiB,
      rssLoadedKiB,
      rssPerAgentKiB: (rssLoadedKiB - rssBaselineKiB) / o.agents,
      anonPerAgentKiB: (anonLoaded - anonBaseline) / o.agents,
      idleCpuPct,
      baselineCpuPct,
      threads,
      kasFds,
      scrapeMs,
      loadRssPerAgentKiB: loadRssKiB / o.agents,
      connectSeconds: report.seconds,
      connectCpuMsPerAgent,
      ...(report.configured !== undefined && {
        configured: report.configured,
        configuredSeconds: report.configuredSeconds!,
      }),
      kasExitCode,
      ...(o.profile && { profile: profileFiles(o.profile, dir, probes) }),
      dir,
    };
  } finally {
    if (load && load.exitCode === null && load.signalCode === null) load.kill("SIGKILL");
    kas.kill();
    if (!o.profile) rmSync(dir, { recursive: true, force: true });
  }
}

/** The modules each agent runs: bench:config's configuration stream, or those asked for. */
function agentModules(o: MeasureOptions): ModuleName[] {
  return o.modules ?? (o.configurationStreamsTimeoutMs !== undefined ? ["configuration"] : []);
}

/** How long the load process waits for every agent's modules' first exchange. */
function modulesTimeoutMs(o: MeasureOptions): number {
  return o.modulesTimeoutMs ?? o.configurationStreamsTimeoutMs ?? 300_000;
}

/** The agents' tokens (each tunnel a distinct agent, in a static tokens file) and kas's environment. */
export async function kasSetup(
  o: MeasureOptions,
  dir: string,
): Promise<{ tokens: string[]; env: Record<string, string> }> {
  const tokens = Array.from(
    { length: o.agents },
    (_, i) => `bench-${i + 1}-${randomBytes(12).toString("hex")}`,
  );
  const table = Object.fromEntries(
    tokens.map((t, i) => [
      t,
      { agentId: i + 1, projectId: 1, agentName: `bench-${i + 1}`, ...o.tokenFields?.(i) },
    ]),
  );
  writeFileSync(join(dir, "tokens.json"), JSON.stringify(table));
  const env: Record<string, string> = {
    ...(await portsEnv()),
    KAS_AGENT_STATIC_TOKENS_FILE: join(dir, "tokens.json"),
    ...o.kasEnv,
  };
  if (o.profile === "perf") {
    env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ""} --perf-basic-prof`; // /tmp/perf-<pid>.map names JIT code for perf
  } else if (o.profile) {
    // After any NODE_OPTIONS the runner gave kas (--kas-env).
    env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ""} ${o.profile === "heap" ? "--expose-gc " : ""}--import ${PROBE}`;
    env.BENCH_SCALE_PROBE_DIR = dir;
    env.BENCH_SCALE_PROFILE = o.profile;
  }
  return { tokens, env };
}

/** The load process, which connects every agent to kas and holds their tunnels. */
export function spawnLoad(
  o: MeasureOptions,
  dir: string,
  url: string,
  tokens: string[],
  planFile = "plan.json",
): ReturnType<typeof spawn> {
  const plan: AgentsPlan = {
    url,
    tokens,
    concurrency: o.concurrency,
    keepAliveIntervalMs: o.agentKeepAliveMs,
    modules: agentModules(o),
    modulesTimeoutMs: modulesTimeoutMs(o),
  };
  writeFileSync(join(dir, planFile), JSON.stringify(plan));
  return spawn(process.execPath, ["--import", "tsx", AGENTS_MAIN, join(dir, planFile)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
}

/** The load process's report once every agent connected (and got its configuration); throws if any did not. */
export async function loadReport(o: MeasureOptions, load: ReturnType<typeof spawn>): Promise<AgentsReport> {
  const report = await deadline(
    once(createInterface({ input: load.stdout! }), "line").then(([l]) => JSON.parse(l) as AgentsReport),
    // Connecting takes longer on a loaded machine: a minute plus 20 ms per agent (19,500: 7.5 min).
    60_000 + 20 * o.agents + (agentModules(o).length > 0 ? modulesTimeoutMs(o) : 0),
    "the load process did not report",
  );
  if (report.failed > 0) throw new Error(`${report.failed} of ${o.agents} tunnels failed: ${report.error}`);
  o.log(`  ${report.connected} tunnels up in ${report.seconds.toFixed(1)} s`);
  if (report.configured !== undefined) {
    o.log(
      `  ${report.configured} agents with their modules' first exchange (${agentModules(o).join(", ")}) in ${report.configuredSeconds!.toFixed(1)} s` +
        (report.configurationError ? `; first error: ${report.configurationError}` : ""),
    );
    if (report.configured < o.agents) {
      throw new Error(`only ${report.configured} of ${o.agents} agents got their modules up`);
    }
  }
  return report;
}

/** kas's CPU over the idle window, in all and by thread (profiled when asked). */
async function idleWindow(
  o: MeasureOptions,
  pid: number,
  dir: string,
): Promise<{ idleCpuPct: number; threads: ThreadCpu[] }> {
  if (o.profile === "cpu") await probe(pid, dir, 0); // starts the profiler
  const perf = o.profile === "perf" ? perfRecord(pid, dir, o.windowMs) : undefined;
  const c0 = cpuSeconds(pid);
  const threads0 = threadCpuSeconds(pid);
  const t0 = performance.now();
  await sleep(o.windowMs);
  const seconds = (performance.now() - t0) / 1000;
  const idleCpuPct = ((cpuSeconds(pid) - c0) / seconds) * 100;
  const threads: ThreadCpu[] = [...threadCpuSeconds(pid)]
    .map(([thread, t]) => {
      const was = threads0.get(thread) ?? { user: 0, system: 0 };
      return {
        thread,
        userPct: ((t.user - was.user) / seconds) * 100,
        systemPct: ((t.system - was.system) / seconds) * 100,
      };
    })
    .filter((t) => t.userPct + t.systemPct > 0)
    .sort((a, b) => b.userPct + b.systemPct - (a.userPct + a.systemPct));
  if (o.profile === "cpu") await probe(pid, dir, 1); // writes cpu-1.cpuprofile
  if (perf) await deadline(once(perf, "exit"), 60_000, "perf record did not finish");
  return { idleCpuPct, threads };
}

/** Where the profiling output is. */
function profileFiles(
  profile: Profile,
  dir: string,
  probes: MemoryProbe[],
): NonNullable<Measurement["profile"]> {
  const memory = profile === "memory" || profile === "heap" || profile === "snapshot";
  return {
    ...(memory && { memory: probes as [MemoryProbe, MemoryProbe] }),
    ...((profile === "cpu" || profile === "cpu-connect") && { cpu: join(dir, "cpu-1.cpuprofile") }),
    ...(profile === "perf" && { perf: join(dir, "perf.data") }),
    ...(profile === "snapshot" && {
      snapshots: [join(dir, "heap-0.heapsnapshot"), join(dir, "heap-1.heapsnapshot")] as [string, string],
    }),
  };
}

/** CPU % of one core over `ms`. */
async function cpuPct(pid: number, ms: number): Promise<number> {
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  await sleep(ms);
  return ((cpuSeconds(pid) - c0) / ((performance.now() - t0) / 1000)) * 100;
}

/** Samples every thread of `pid` with Linux perf (call graphs) for `ms`, into dir/perf.data. */
function perfRecord(pid: number, dir: string, ms: number) {
  const args = ["record", "-F", "997", "-g", "-p", String(pid), "-o", join(dir, "perf.data")];
  return spawn("perf", [...args, "--", "sleep", String(ms / 1000)], { stdio: "ignore" });
}

/** Signals the preloaded probe (SIGUSR2) and waits until it has done its step. */
/** One step of kas's preloaded probe (probe.js): SIGUSR2, then its done-<seq> file. */
export async function probe(pid: number, dir: string, seq: number): Promise<void> {
  process.kill(pid, "SIGUSR2");
  const until = Date.now() + 120_000;
  while (!existsSync(join(dir, `done-${seq}`))) {
    if (Date.now() > until) throw new Error("kas's probe did not answer");
    await sleep(100);
  }
}

export async function probeMemory(pid: number, dir: string, seq: number): Promise<MemoryProbe> {
  await probe(pid, dir, seq);
  return JSON.parse(readFileSync(join(dir, `memory-${seq}.json`), "utf8")) as MemoryProbe;
}

/** The median time of 5 GETs of `url` (kas's /metrics), one after another, ms. */
async function scrapeTime(url: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await (await fetch(url, { signal: AbortSignal.timeout(30_000) })).text();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b)[2]!;
}

export async function waitForGauge(
  url: string,
  name: string,
  want: number,
  timeoutMs: number,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  let seen = "nothing";
  for (;;) {
    const text = await (await fetch(url)).text();
    const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
    seen = m?.[1] ?? "no such metric";
    if (Number(seen) === want) return;
    if (Date.now() > until) throw new Error(`${name} is ${seen}, expected ${want}`);
    await sleep(250);
  }
}

export function deadline<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
