// Memory that comes back: one kas, `rounds` times N agents connecting (running their modules, if
// any), then leaving, half cleanly (GoAway, then close: the load process's SIGTERM) and half cut
// (the load process killed: its sockets end without a word from yamux or WebSocket). After each
// round, once kas counts no agent, kas's heap after a forced full collection (probe.js "heap").
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { spawnKas } from "../../test/kas/support/kas-process.ts";
import { growthPerAgent } from "./heap-summary.ts";
import { kasModulesSetup } from "./kas-modules.ts";
import {
  deadline,
  kasSetup,
  loadReport,
  type MeasureOptions,
  type MemoryProbe,
  probeMemory,
  spawnLoad,
  waitForGauge,
} from "./measure.ts";
import { rssKiB } from "./proc.ts";

export interface RoundsOptions extends Omit<MeasureOptions, "profile" | "windowMs"> {
  rounds: number;
  /**
   * Heap snapshots after each round instead of forced collections (writing one collects first);
   * logs what grew from round 2 to the last, per agent and round: where a leak is.
   */
  snapshots?: boolean;
}

export interface RoundMemory {
  /** 0: before any agent. */
  round: number;
  /** After forced full collections, KiB. */
  heapUsedKiB: number;
  externalKiB: number;
  arrayBuffersKiB: number;
  /** Without a collection forced by the kernel's view: RSS as it stands. */
  rssKiB: number;
  /** Seconds from the round's start until kas counted every agent gone. */
  seconds: number;
}

export async function measureRounds(o: RoundsOptions): Promise<RoundMemory[]> {
  const dir = mkdtempSync(join(tmpdir(), "bench-scale-rounds-"));
  const setup = kasModulesSetup(dir, o.agents, o.modules ?? []);
  const m: MeasureOptions = { ...o, ...setup, windowMs: 0, profile: o.snapshots ? "snapshot" : "heap" };
  const { tokens, env } = await kasSetup(m, dir);
  const kas = await spawnKas(env, { entry: o.kasEntry, timeoutMs: 60_000 });
  const pid = kas.child.pid!;
  const metrics = `${kas.addresses.observability}/metrics`;
  const configuration = o.modules?.includes("configuration") ?? false;
  const out: RoundMemory[] = [];
  let seq = 0;
  const reading = async (round: number, seconds: number) => {
    const p: MemoryProbe = await probeMemory(pid, dir, seq++);
    const kib = (b: number) => b / 1024;
    out.push({
      round,
      heapUsedKiB: kib(p.usage.heapUsed),
      externalKiB: kib(p.usage.external),
      arrayBuffersKiB: kib(p.usage.arrayBuffers),
      rssKiB: rssKiB(pid),
      seconds,
    });
    const last = out.at(-1)!;
    o.log(
      `  round ${round}: heap after GC ${(last.heapUsedKiB / 1024).toFixed(1)} MiB, external ` +
        `${(last.externalKiB / 1024).toFixed(1)} MiB, RSS ${(last.rssKiB / 1024).toFixed(1)} MiB`,
    );
  };
  try {
    await sleep(o.settleMs);
    await reading(0, 0);
    const half = Math.ceil(tokens.length / 2);
    const halves = { agents: half, concurrency: Math.max(1, Math.floor(o.concurrency / 2)) };
    for (let round = 1; round <= o.rounds; round++) {
      const t0 = performance.now();
      const url = kas.addresses.agent;
      const clean = spawnLoad({ ...m, ...halves }, dir, url, tokens.slice(0, half), "plan-clean.json");
      const cut = spawnLoad({ ...m, ...halves }, dir, url, tokens.slice(half), "plan-cut.json");
      try {
        await Promise.all([
          loadReport({ ...m, agents: half }, clean),
          loadReport({ ...m, agents: tokens.length - half }, cut),
        ]);
        await waitForGauge(metrics, "kas_connected_agents", tokens.length, 30_000);
        clean.kill("SIGTERM");
        cut.kill("SIGKILL");
        await deadline(
          Promise.all([once(clean, "exit"), once(cut, "exit")]),
          15_000,
          "the load processes did not exit",
        );
      } finally {
        for (const p of [clean, cut]) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
      }
      await waitForGauge(metrics, "kas_connected_agents", 0, 120_000);
      if (configuration) await waitForGauge(metrics, "kas_agent_configuration_streams", 0, 60_000);
      const seconds = (performance.now() - t0) / 1000;
      // Timers a departure leaves (drain graces, backstops) run out before the reading.
      await sleep(o.settleMs);
      await reading(round, seconds);
    }
    kas.child.kill("SIGTERM");
    await kas.exitCode(40_000);
    if (o.snapshots) {
      o.log(
        "  heap snapshot growth from before any agent to after round 1, per agent (what agents gone leave):",
      );
      for (const g of growthPerAgent(
        join(dir, "heap-0.heapsnapshot"),
        join(dir, "heap-1.heapsnapshot"),
        o.agents,
        25,
      )) {
        o.log(
          `    ${String(Math.round(g.bytesPerAgent)).padStart(7)} B  x${g.countPerAgent.toFixed(3)}  ${g.key}`,
        );
      }
    }
    if (o.snapshots && o.rounds >= 3) {
      const span = o.agents * (o.rounds - 2);
      o.log(
        `  heap snapshot growth from round 2 to ${o.rounds}, per agent and round (self size by type:name):`,
      );
      for (const g of growthPerAgent(
        join(dir, "heap-2.heapsnapshot"),
        join(dir, `heap-${o.rounds}.heapsnapshot`),
        span,
        25,
      )) {
        o.log(
          `    ${String(Math.round(g.bytesPerAgent)).padStart(7)} B  x${g.countPerAgent.toFixed(3)}  ${g.key}`,
        );
      }
    }
    return out;
  } finally {
    kas.kill();
    if (!o.snapshots) rmSync(dir, { recursive: true, force: true });
    else o.log(`  snapshots in ${dir}`);
  }
}
