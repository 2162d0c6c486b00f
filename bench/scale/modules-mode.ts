// bench:scale --modules: kas with N idle agents that run agentk's modules, one fresh kas per module
// added in turn (tunnels only, + configuration, + tracker, ...), so each module's cost per agent is
// the difference between two rows. Memory: RSS as the kernel charges it, and kas's heap after a
// forced full collection (probe.js "heap"; retained objects only, none of the garbage RSS holds).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { markdownTable, round } from "../lib/stats.ts";
import type { ModuleName } from "./agent-modules.ts";
import { logSelfTime } from "./cpu-summary.ts";
import { growthPerAgent } from "./heap-summary.ts";
import { kasModulesSetup } from "./kas-modules.ts";
import { type Measurement, type MeasureOptions, measure, type Profile } from "./measure.ts";

/** The target for agents with every module on. */
const TARGET_KIB = 64;
const TARGET_CPU_PCT = 5;

export interface ModulesModeOptions extends Omit<MeasureOptions, "agents" | "modules" | "profile"> {
  counts: number[];
  modules: ModuleName[];
  /** Default "heap"; another profile replaces it (and the heap columns then show its readings). */
  profile: Profile | undefined;
  json: boolean;
  /** Only the tunnel-only row and the row with every module (no per-module breakdown): half the time, for before/after pairs. */
  endsOnly?: boolean;
  /** Only the row with every module: before/after pairs of what the modules hold (the tunnel-only row does not change). */
  fullOnly?: boolean;
}

interface Row {
  modules: ModuleName[];
  m: Measurement;
  /** kas's heap used / external memory growth per agent, KiB, from the probe's two readings. */
  heapPerAgentKiB: number;
  externalPerAgentKiB: number;
  /** Growth of V8's new space (semi-spaces) between the two readings, MiB. */
  newSpaceGrowthMiB: number;
}

export async function modulesMode(o: ModulesModeOptions): Promise<void> {
  const rows: Row[] = [];
  for (const agents of o.counts) {
    // Cumulative: [], [configuration], [configuration, tracker], ...
    for (let k = 0; k <= o.modules.length; k++) {
      if (o.endsOnly && k > 0 && k < o.modules.length) continue;
      if (o.fullOnly && k < o.modules.length) continue;
      const modules = o.modules.slice(0, k);
      o.log(`N = ${agents}, modules: ${modules.join(", ") || "none (tunnels only)"}`);
      const dir = mkdtempSync(join(tmpdir(), "bench-scale-modules-"));
      try {
        const setup = kasModulesSetup(dir, agents, modules);
        const kasEnv = { ...o.kasEnv, ...setup.kasEnv };
        const m = await measure({ ...o, ...setup, kasEnv, agents, modules, profile: o.profile ?? "heap" });
        const [before, after] = m.profile?.memory ?? [];
        const per = (key: "heapUsed" | "external") =>
          before && after ? (after.usage[key] - before.usage[key]) / 1024 / agents : Number.NaN;
        // V8's young generation grows (to 32 MiB) under the connection storm and stays: RSS that is
        // no agent's, a large share of RSS per agent at a few hundred agents.
        const newSpace = (p: typeof before) =>
          p?.spaces.find((x) => x.space_name === "new_space")?.space_size ?? 0;
        const newSpaceGrowthMiB = (newSpace(after) - newSpace(before)) / 2 ** 20;
        rows.push({
          modules,
          m,
          heapPerAgentKiB: per("heapUsed"),
          externalPerAgentKiB: per("external"),
          newSpaceGrowthMiB,
        });
        o.log(
          `  RSS per agent ${round(m.rssPerAgentKiB)} KiB, heap after GC per agent ${round(per("heapUsed"))} KiB, ` +
            `idle CPU ${round(m.idleCpuPct, 2)} %, kas CPU per agent arriving ${round(m.connectCpuMsPerAgent, 2)} ms`,
        );
        if (m.profile?.cpu)
          logSelfTime(o.log, m.profile.cpu, o.profile === "cpu-connect" ? "arrival" : "idle window", 25);
        if (m.profile?.snapshots) {
          o.log("  per agent (heap snapshot, self size growth by type:constructor):");
          for (const g of growthPerAgent(...m.profile.snapshots, agents, 40)) {
            o.log(
              `    ${String(Math.round(g.bytesPerAgent)).padStart(7)} B  x${round(g.countPerAgent, 2)}  ${g.key}`,
            );
          }
        }
        // BENCH_SCALE_KEEP=1 keeps the snapshots (and the probe's readings) for a closer look.
        if (process.env.BENCH_SCALE_KEEP) o.log(`  profile files kept in ${m.dir}`);
        else rmSync(m.dir, { recursive: true, force: true });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  if (o.json) {
    const json = rows.map((r) => ({
      agents: r.m.agents,
      modules: r.modules,
      rss_per_agent_kib: round(r.m.rssPerAgentKiB),
      heap_per_agent_kib: round(r.heapPerAgentKiB),
      external_per_agent_kib: round(r.externalPerAgentKiB),
      new_space_growth_mib: round(r.newSpaceGrowthMiB),
      idle_cpu_pct: round(r.m.idleCpuPct, 2),
      arrival_cpu_ms_per_agent: round(r.m.connectCpuMsPerAgent, 2),
    }));
    process.stdout.write(`${JSON.stringify(json)}\n`);
    return;
  }
  const table = rows.map((r, i) => {
    const prev = i > 0 && rows[i - 1]!.m.agents === r.m.agents ? rows[i - 1] : undefined;
    const added =
      r.modules.length > 1 && (o.endsOnly || o.fullOnly) ? r.modules.join(", ") : r.modules.at(-1);
    const delta = (a: number, b: number | undefined) => (b === undefined ? "-" : round(a - b));
    const full = r.modules.length === o.modules.length;
    const verdict = full
      ? `<= ${TARGET_KIB} KiB: ${r.m.rssPerAgentKiB <= TARGET_KIB ? "ok" : "MISSED"}; < ${TARGET_CPU_PCT} %: ${r.m.idleCpuPct < TARGET_CPU_PCT ? "ok" : "MISSED"}`
      : "";
    return [
      r.m.agents,
      added ? `+ ${added}` : "tunnel only",
      round(r.m.rssPerAgentKiB),
      delta(r.m.rssPerAgentKiB, prev?.m.rssPerAgentKiB),
      round(r.heapPerAgentKiB),
      delta(r.heapPerAgentKiB, prev?.heapPerAgentKiB),
      round(r.externalPerAgentKiB),
      round(r.newSpaceGrowthMiB),
      round(r.m.idleCpuPct, 2),
      round(r.m.connectCpuMsPerAgent, 2),
      verdict,
    ];
  });
  console.log(
    markdownTable(
      [
        "N",
        "agents run",
        "RSS per agent KiB",
        "module's RSS KiB",
        "heap after GC per agent KiB",
        "module's heap KiB",
        "external per agent KiB",
        "new space growth MiB",
        "idle CPU % of one core",
        "kas CPU ms per agent arriving",
        "target (every module)",
      ],
      table,
    ),
  );
}
