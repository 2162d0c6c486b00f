// npm run bench:config [-- --json] [-- --parts 1,2,3 --rounds 50 --steady-agents 10000 --agents 5000 ...]
// Agent configuration: (1) git push -> configuration applied in agentk, across two kas replicas
// on Redis (push.ts); (2) steady-state Gitaly calls for many agents with no changes, on a virtual
// clock (steady.ts, a process of its own); (3) kas's RSS and idle CPU with every agent holding its
// configuration stream, against the same without streams (bench/scale's measure, kas from the build).
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENTK_KEEPALIVE_DEFAULT } from "../../cmd/agentk/config/index.ts";
import { DEFAULT_GITALY_RATE_LIMITS } from "../../cmd/kas/repositories/rate-limits.ts";
import { parseDuration } from "../../tool/config/values.ts";
import { makeConfigRepos } from "../lib/agent-repos.ts";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { type Measurement, measure } from "../scale/measure.ts";
import { measurePush, type PushPath } from "./push.ts";
import type { SteadyPlan, SteadyResult } from "./steady.ts";

const AGENTK_KEEPALIVE_MS = parseDuration(AGENTK_KEEPALIVE_DEFAULT);
const { args, log } = benchArgs({
  parts: "1,2,3",
  // part 1
  rounds: "50",
  pace: "600",
  // part 2
  "steady-agents": "10000",
  "steady-repos": "100",
  "poll-period": "300",
  simulate: "1500",
  "steady-window": "300",
  // part 3
  agents: "5000",
  "config-repos": "10",
  settle: "5",
  window: String(AGENTK_KEEPALIVE_MS / 1000),
  "baseline-window": "20",
});
const parts = new Set(args.parts.split(",").map(Number));
const out: string[] = [];
const json: Record<string, unknown> = {};
const ms = (n: number) => round(n, 1);

// ---------------------------------------------------------------------------------------------
if (parts.has(1)) {
  log("part 1: push -> configuration applied in agentk");
  const r = await measurePush({
    rounds: Number(args.rounds),
    paceMs: Number(args.pace),
    log,
  });
  const label: Record<PushPath, string> = {
    B: "push to replica B, agent on A (Redis fan-out)",
    A: "push to replica A, agent on A (Redis pub/sub, same replica)",
    C: "push to a single kas without Redis (baseline)",
  };
  const rows = (["B", "A", "C"] as const).map((p) => {
    const s = r.ms[p];
    if (!s || s.length === 0)
      return [label[p], "-", "-", "-", 0, "-", `failed: ${r.failed[p] ?? "no rounds"}`];
    const p50 = percentile(s, 50);
    const target = p === "B" ? (p50 <= 250 ? "<= 250 ms: ok" : "<= 250 ms: MISSED") : "";
    return [
      label[p],
      ms(p50),
      ms(percentile(s, 99)),
      ms(Math.max(...s)),
      s.length,
      r.deferredRounds[p] ?? 0,
      target,
    ];
  });
  const b = r.ms.B ?? [];
  const c = r.ms.C ?? [];
  out.push(
    "### push -> configuration applied in agentk",
    "",
    markdownTable(
      ["path", "p50 ms", "p99 ms", "max ms", "rounds", "rounds with a rate-limit wait", "target"],
      rows,
    ),
    "",
    `Redis fan-out cost at p50 (B - C): ${b.length && c.length ? ms(percentile(b, 50) - percentile(c, 50)) : "-"} ms; ` +
      `at p99: ${b.length && c.length ? ms(percentile(b, 99) - percentile(c, 99)) : "-"} ms. ` +
      `Rounds rotate the paths, ${args.pace} ms apart; kas_gitaly_rate_limited_total during the rounds: ${r.rateLimitWaits}.`,
    "",
  );
  if (b.length) json.push_to_config_ms = { p50: ms(percentile(b, 50)), p99: ms(percentile(b, 99)) };
}

// ---------------------------------------------------------------------------------------------
if (parts.has(2)) {
  log("part 2: steady-state Gitaly calls, virtual clock");
  const plan: SteadyPlan = {
    agents: Number(args["steady-agents"]),
    repos: Number(args["steady-repos"]),
    pollPeriodS: Number(args["poll-period"]),
    simulateS: Number(args.simulate),
    windowS: Number(args["steady-window"]),
  };
  const child = spawn(
    process.execPath,
    ["--import", "tsx", new URL("./steady.ts", import.meta.url).pathname, JSON.stringify(plan)],
    { stdio: ["ignore", "pipe", args.json ? "ignore" : "inherit"] },
  );
  let text = "";
  child.stdout!.on("data", (d: Buffer) => {
    text += d;
  });
  const [code] = await once(child, "exit");
  if (code !== 0) throw new Error(`steady.ts exited ${code}`);
  const r = JSON.parse(text.trim().split("\n").at(-1)!) as SteadyResult;
  const d = DEFAULT_GITALY_RATE_LIMITS;
  const allowed = (rate: number) => Math.floor(rate * r.pollPeriodS);
  const keeps = r.callsPerS >= 0.95 * r.theoreticalPerS;
  out.push(
    `### Steady-state Gitaly calls, ${r.agents} agents, no changes, poll period ${r.pollPeriodS} s`,
    "",
    markdownTable(
      ["metric", "measured", "theoretical (agents / period)"],
      [
        ["Gitaly calls/s (last window)", round(r.callsPerS, 2), round(r.theoreticalPerS, 2)],
        ["calls per agent per hour", round(r.callsPerAgentPerHour, 2), round(3600 / r.pollPeriodS, 2)],
        ["time between two polls of a project, p50 s", round(r.pollIntervalP50S, 1), r.pollPeriodS],
        ["time between two polls of a project, p90 s", round(r.pollIntervalP90S, 1), r.pollPeriodS],
        ["all agents read after a restart, s", r.allReadAtS, `< ${r.pollPeriodS}`],
      ],
    ),
    "",
    `Window: the last ${r.windowS} of ${r.simulateS} virtual seconds; calls in it by method: ` +
      `${Object.entries(r.window)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}; over the whole simulation: ` +
      `${Object.entries(r.total)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}; calls deferred by a rate limit: ${
        Object.entries(r.rateLimited)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ") || "none"
      }. ${r.agents} projects (one per agent, each its own Gitaly relative path and watch) on ${r.repos} bare repositories; ` +
      `${round(r.realSeconds, 0)} s of real time.`,
    "",
    markdownTable(
      [
        "kas default limit (one replica, one Gitaly server)",
        "token bucket (exact, in process)",
        "agents it allows at this period",
      ],
      [
        [
          "gitaly.per_server_api_rate_limit",
          `${d.perServer.ratePerSecond}/s, burst ${d.perServer.burst}`,
          allowed(d.perServer.ratePerSecond),
        ],
        [
          "gitaly.global_api_rate_limit",
          `${d.processGlobal.ratePerSecond}/s, burst ${d.processGlobal.burst}`,
          allowed(d.processGlobal.ratePerSecond),
        ],
      ],
    ),
    "",
    `Do the default limits let ${r.agents} agents keep the ${r.pollPeriodS} s period? ${keeps ? "yes" : "no"}: ` +
      `measured ${round(r.callsPerS, 2)} calls/s against ${round(r.theoreticalPerS, 2)} needed.`,
    "",
  );
  json.gitaly_calls_per_s = round(r.callsPerS, 2);
}

// ---------------------------------------------------------------------------------------------
if (parts.has(3)) {
  const agents = Number(args.agents);
  const nRepos = Number(args["config-repos"]);
  log(`part 3: kas RSS and idle CPU, ${agents} agents, with and without configuration streams`);
  const ROOT = join(import.meta.dirname, "../..");
  log("building kas (tsc -p tsconfig.build.json)");
  execFileSync(
    process.execPath,
    [createRequire(import.meta.url).resolve("typescript/bin/tsc"), "-p", "tsconfig.build.json"],
    { cwd: ROOT, stdio: ["ignore", process.stderr, "inherit"] },
  );
  const kasEntry = join(ROOT, "dist/cmd/kas/main.js");
  const dir = mkdtempSync(join(tmpdir(), "bench-config-repos-"));
  try {
    const repos = makeConfigRepos(dir, nRepos, agents);
    const common = {
      agents,
      kasEntry,
      settleMs: Number(args.settle) * 1000,
      windowMs: Number(args.window) * 1000,
      baselineWindowMs: Number(args["baseline-window"]) * 1000,
      concurrency: 64,
      agentKeepAliveMs: AGENTK_KEEPALIVE_MS,
      log,
    };
    log("  without configuration streams (tunnels only)");
    // BENCH_SCALE_PROFILE=memory: kas's process.memoryUsage() per agent, from inside (bench/scale/probe.js).
    const profile = process.env.BENCH_SCALE_PROFILE === "memory" ? ("memory" as const) : undefined;
    const perAgent = (m: Measurement) => {
      if (!m.profile?.memory) return;
      const [a, b] = m.profile.memory;
      const keys = ["rss", "heapUsed", "external", "arrayBuffers"] as const;
      log(
        `  per agent: ${keys.map((k) => `${k} ${round((b.usage[k] - a.usage[k]) / 1024 / m.agents, 1)} KiB`).join(", ")}`,
      );
      rmSync(m.dir, { recursive: true, force: true });
    };
    const plain = await measure({ ...common, profile });
    perAgent(plain);
    log("  with a configuration stream per agent");
    const streams = await measure({
      ...common,
      tokenFields: (i) => ({ repository: repos[i % nRepos] }),
      // The first read of 5,000 files at kas's default 15 calls/s per server would take minutes;
      // memory and idle CPU do not depend on it.
      kasEnv: Object.fromEntries(
        ["GLOBAL", "PER_SERVER"].flatMap((s) => [
          [`KAS_GITALY_${s}_API_RATE_LIMIT_REFILL_RATE_PER_SECOND`, "1000"],
          [`KAS_GITALY_${s}_API_RATE_LIMIT_BUCKET_SIZE`, "2000"],
        ]),
      ),
      configurationStreamsTimeoutMs: 300_000,
      profile,
    });
    perAgent(streams);
    const mib = (kib: number) => round(kib / 1024);
    const verdict = (m: Measurement) =>
      `<= 64 KiB/agent: ${m.rssPerAgentKiB <= 64 ? "ok" : "MISSED"}; < 5 % CPU: ${m.idleCpuPct < 5 ? "ok" : "MISSED"}`;
    const row = (name: string, m: Measurement) => [
      name,
      m.agents,
      mib(m.rssBaselineKiB),
      mib(m.rssLoadedKiB),
      round(m.rssPerAgentKiB),
      round(m.anonPerAgentKiB),
      round(m.idleCpuPct, 2),
      verdict(m),
    ];
    out.push(
      `### kas with ${agents} idle agents, each holding its configuration stream`,
      "",
      markdownTable(
        [
          "agents hold",
          "N",
          "kas RSS baseline MiB",
          "kas RSS with N agents MiB",
          "RSS per agent KiB",
          "anonymous memory per agent KiB",
          "idle CPU % of one core",
          "target",
        ],
        [row("tunnel only (bench:scale)", plain), row("tunnel + gRPC channel + GetConfiguration", streams)],
      ),
      "",
      `Cost of the channel and stream per agent: RSS ${round(streams.rssPerAgentKiB - plain.rssPerAgentKiB)} KiB, ` +
        `anonymous memory ${round(streams.anonPerAgentKiB - plain.anonPerAgentKiB)} KiB; idle CPU ` +
        `${round(streams.idleCpuPct - plain.idleCpuPct, 2)} points. Configurations in ${nRepos} shared local git ` +
        `repositories (${Math.ceil(agents / nRepos)} agents each, one file per agent), all ${streams.configured} ` +
        `first configurations in ${round(streams.configuredSeconds ?? 0)} s (kas's Gitaly limits raised to 1000/s for ` +
        `this run only). kas from the build; agents ping every ${AGENTK_KEEPALIVE_MS / 1000} s; idle window ` +
        `${args.window} s; kas fds ${plain.kasFds} / ${streams.kasFds}; load process RSS per agent ` +
        `${round(plain.loadRssPerAgentKiB)} / ${round(streams.loadRssPerAgentKiB)} KiB.`,
      "",
    );
    json.agents = streams.agents;
    json.rss_per_agent_kib = round(streams.rssPerAgentKiB);
    json.idle_cpu_pct = round(streams.idleCpuPct, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.json) process.stdout.write(`${JSON.stringify(json)}\n`);
else console.log(out.join("\n"));
process.exit(0);
