// The herd's agents as the runner sees them: N agents (agents.ts) split over one or more processes,
// each with a contiguous share of the tokens. One process is one event loop and one heap for all its
// agents; when it stalls (its collector, or the CPU it gets at its niceness), every agent in it goes
// quiet at once and then speaks at once, which real agents on machines of their own do not.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { probe as probeStep } from "../scale/measure.ts";
import { cpuSeconds } from "../scale/proc.ts";
import type { AgentsMessage, AgentsPlan, HerdReport } from "./protocol.ts";

export interface AgentsProcessesOptions {
  plan: Omit<AgentsPlan, "firstIndex">;
  processes: number;
  /** Where each process's plan (and stall trace) goes. */
  dir: string;
  /** Niceness of every process (0: as kas). */
  nice: number;
  /** Their stderr (progress lines) to ours. */
  verbose: boolean;
  /** Preload bench/scale/probe.js in `stalls` mode, each process tracing into a folder of its own. */
  stallsProbe?: string;
}

export class AgentsProcesses {
  readonly #procs: ChildProcess[] = [];
  readonly #messages: AgentsMessage[][] = [];
  readonly #probeDirs: string[] = [];

  constructor(o: AgentsProcessesOptions) {
    const n = o.plan.tokens.length;
    const per = Math.ceil(n / o.processes);
    for (let p = 0, first = 0; first < n; p++, first += per) {
      const plan: AgentsPlan = {
        ...o.plan,
        tokens: o.plan.tokens.slice(first, first + per),
        firstIndex: first,
        // The same number dialing at once in all, while they first come up.
        concurrency: Math.max(1, Math.round(o.plan.concurrency / o.processes)),
      };
      const planFile = join(o.dir, `plan-${p}.json`);
      writeFileSync(planFile, JSON.stringify(plan));
      const probeDir = join(o.dir, `agents-probe-${p}`);
      if (o.stallsProbe) mkdirSync(probeDir);
      this.#probeDirs.push(probeDir);
      const args = [
        ...(o.stallsProbe ? ["--import", o.stallsProbe] : []),
        "--import",
        "tsx",
        new URL("./agents.ts", import.meta.url).pathname,
        planFile,
      ];
      const proc = spawn(
        o.nice !== 0 ? "nice" : process.execPath,
        o.nice !== 0 ? ["-n", String(o.nice), process.execPath, ...args] : args,
        {
          stdio: ["ignore", "ignore", o.verbose ? "inherit" : "ignore", "ipc"],
          env: o.stallsProbe
            ? { ...process.env, BENCH_SCALE_PROBE_DIR: probeDir, BENCH_SCALE_PROFILE: "stalls" }
            : process.env,
        },
      );
      const box: AgentsMessage[] = [];
      proc.on("message", (m: AgentsMessage) => box.push(m));
      this.#procs.push(proc);
      this.#messages.push(box);
    }
  }

  /** Resolves once every process has every agent of its own up the first time. */
  async up(timeoutMs: number): Promise<void> {
    await Promise.all(this.#procs.map((_, p) => this.#next(p, "up", timeoutMs)));
  }

  /** The runner is about to kill a replica: from now on each process times its agents until they are back. */
  mark(): void {
    for (const proc of this.#procs) proc.send("mark");
  }

  /** Every process's report, merged. */
  async report(): Promise<HerdReport> {
    for (const proc of this.#procs) proc.send("report");
    const reports = await Promise.all(
      this.#procs.map(async (_, p) => (await this.#next(p, "report", 30_000)).report),
    );
    const firstError = reports.find((r) => r.firstError !== undefined)?.firstError;
    return {
      up: sum(reports.map((r) => r.up)),
      lost: sum(reports.map((r) => r.lost)),
      backMs: reports.flatMap((r) => r.backMs),
      tunnelBackMs: reports.flatMap((r) => r.tunnelBackMs),
      pending: sum(reports.map((r) => r.pending)),
      moduleFailures: sum(reports.map((r) => r.moduleFailures)),
      ...(firstError !== undefined && { firstError }),
    };
  }

  /** Their CPU time so far, all together, seconds. */
  cpuSeconds(): number {
    return sum(this.#procs.map((proc) => cpuSeconds(proc.pid!)));
  }

  /** One step of every process's stall trace (probe.js); step `seq` writes `stalls-<seq>.json` in each folder. */
  async stallsStep(seq: number): Promise<string[]> {
    await Promise.all(this.#procs.map((proc, p) => probeStep(proc.pid!, this.#probeDirs[p]!, seq)));
    return this.#probeDirs.map((d) => join(d, `stalls-${seq}.json`));
  }

  kill(): void {
    for (const proc of this.#procs) proc.kill("SIGKILL");
  }

  async #next<K extends "up" | "report">(p: number, key: K, timeoutMs: number) {
    const proc = this.#procs[p]!;
    const box = this.#messages[p]!;
    const until = performance.now() + timeoutMs;
    for (;;) {
      const i = box.findIndex((m) => key in m);
      if (i >= 0) return box.splice(i, 1)[0] as Extract<AgentsMessage, Record<K, unknown>>;
      if (proc.exitCode !== null) throw new Error(`agents process ${p} exited (${proc.exitCode})`);
      if (performance.now() > until)
        throw new Error(`no "${key}" from agents process ${p} within ${timeoutMs} ms`);
      await once(proc, "message", {
        signal: AbortSignal.timeout(Math.max(1, Math.ceil(until - performance.now()))),
      }).catch(() => {});
    }
  }
}

function sum(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}
