// bench:scale --rounds: prints rounds.ts's readings, one row per round, and whether the heap after
// a forced full collection stays flat after the third round.
import { markdownTable, round } from "../lib/stats.ts";
import type { ModuleName } from "./agent-modules.ts";
import type { MeasureOptions } from "./measure.ts";
import { measureRounds, type RoundMemory } from "./rounds.ts";

/** From round 3 on, the heap after GC may move this much from round 3's and still count as flat. */
const FLAT_KIB = 1024;

export interface RoundsModeOptions
  extends Omit<MeasureOptions, "agents" | "modules" | "profile" | "windowMs"> {
  counts: number[];
  rounds: number;
  modules: ModuleName[];
  json: boolean;
  /** Heap snapshots instead of forced collections, and where the heap grew (rounds.ts). */
  snapshots: boolean;
}

export async function roundsMode(o: RoundsModeOptions): Promise<void> {
  const runs: Array<{ agents: number; rounds: RoundMemory[] }> = [];
  for (const agents of o.counts) {
    o.log(`N = ${agents}, ${o.rounds} rounds, modules: ${o.modules.join(", ") || "none (tunnels only)"}`);
    runs.push({ agents, rounds: await measureRounds({ ...o, agents, modules: o.modules }) });
  }
  const flat = (rs: RoundMemory[]) => {
    const third = rs.find((r) => r.round === 3);
    if (!third) return undefined;
    const later = rs.filter((r) => r.round > 3);
    return Math.max(0, ...later.map((r) => r.heapUsedKiB - third.heapUsedKiB));
  };
  if (o.json) {
    const json = runs.map(({ agents, rounds }) => ({
      agents,
      modules: o.modules,
      heap_after_gc_mib: rounds.map((r) => round(r.heapUsedKiB / 1024, 2)),
      rss_mib: rounds.map((r) => round(r.rssKiB / 1024, 1)),
      growth_after_round_3_kib: flat(rounds),
    }));
    process.stdout.write(`${JSON.stringify(json)}\n`);
    return;
  }
  for (const { agents, rounds } of runs) {
    const mib = (kib: number) => round(kib / 1024, 2);
    console.log(
      markdownTable(
        ["round", "heap after GC MiB", "external MiB", "array buffers MiB", "RSS MiB", "round s"],
        rounds.map((r) => [
          r.round === 0 ? "before any agent" : r.round,
          mib(r.heapUsedKiB),
          mib(r.externalKiB),
          mib(r.arrayBuffersKiB),
          round(r.rssKiB / 1024, 1),
          r.round === 0 ? "-" : round(r.seconds, 1),
        ]),
      ),
    );
    const g = flat(rounds);
    console.log(
      `\n${agents} agents per round (half leave cleanly, half cut), modules: ${o.modules.join(", ") || "none"}. ` +
        (g === undefined
          ? "Fewer than 4 rounds: no verdict on flatness."
          : `Heap after GC, most above round 3's in later rounds: ${round(g)} KiB ` +
            `(flat within ${FLAT_KIB} KiB: ${g <= FLAT_KIB ? "ok" : "MISSED"}).`) +
        "\n",
    );
  }
}
