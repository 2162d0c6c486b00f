// Part 2 of bench:config, in a process of its own (it replaces the process's clock): kas's
// configuration polling for many agents with no changes, on a virtual clock.
//
// Real parts: ConfigurationWatches (kas's poll loop), RateLimitedRepositories with kas's default
// process limits (no Redis: one replica, so the per-agent and cluster limits, which live in Redis,
// are off), GitalyRepositories (grpc-js), and the Gitaly test server in another process (real
// time) over real bare git repositories. Each agent is its own project (its own Gitaly relative
// path, so its own watch and poll); on disk the projects are symlinks to `repos` shared bare
// repositories. Every agent subscribes as one reconnecting after a kas restart (it has the
// current commit), so its first poll falls at random within the period, as kas spreads them.
// The virtual clock runs the poll timers, rate-limit windows and waits; Gitaly's own service time
// is not charged to it (the clock stands still while calls are in flight).
//
// argv[2]: JSON SteadyPlan. Prints one JSON SteadyResult line.
import { execFileSync, fork } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchGit, benchGitEnv } from "../lib/git.ts";
import { real, VirtualClock } from "./virtual-clock.ts";

export interface SteadyPlan {
  agents: number;
  repos: number;
  pollPeriodS: number;
  /** Virtual seconds simulated in all. */
  simulateS: number;
  /** The last `windowS` virtual seconds are the measurement. */
  windowS: number;
}

export interface SteadyResult {
  agents: number;
  repos: number;
  pollPeriodS: number;
  simulateS: number;
  windowS: number;
  /** Gitaly calls in the window, by method. */
  window: Record<string, number>;
  /** Gitaly calls over the whole simulation, by method. */
  total: Record<string, number>;
  callsPerS: number;
  callsPerAgentPerHour: number;
  theoreticalPerS: number;
  /** Virtual seconds until every agent had its first read (the reconnect backlog drained); -1: never. */
  allReadAtS: number;
  /** Median and p90 virtual seconds between two polls of one project, in the window. */
  pollIntervalP50S: number;
  pollIntervalP90S: number;
  /** kas_gitaly_rate_limited_total by scope, whole simulation. */
  rateLimited: Record<string, number>;
  realSeconds: number;
}

const plan = JSON.parse(process.argv[2]!) as SteadyPlan;
const startedReal = real.monotonic();

// --- repositories: `repos` bare repositories, `agents` symlinks (one project per agent) ---
const dir = mkdtempSync(join(tmpdir(), "bench-config-steady-"));
const storage = join(dir, "storage");
mkdirSync(join(storage, "repos"), { recursive: true });
mkdirSync(join(storage, "agents"));
const gitEnv = benchGitEnv(dir);
const git = benchGit(dir);
const agentName = (i: number) => `agent-${i}`;
const commits: string[] = [];
for (let r = 0; r < plan.repos; r++) {
  const repo = join(storage, "repos", `repo-${r}.git`);
  execFileSync("git", ["init", "-q", "--bare", "-b", "main", repo], { env: gitEnv });
  const blob = git(repo, ["hash-object", "-w", "--stdin"], "observability:\n  logging:\n    level: info\n");
  const lines: string[] = [];
  for (let i = r; i < plan.agents; i += plan.repos) {
    lines.push(`100644 ${blob}\t.gitlab/agents/${agentName(i)}/config.yaml\0`);
  }
  const index = { GIT_INDEX_FILE: join(dir, `index-${r}`) };
  git(repo, ["update-index", "-z", "--index-info"], lines.join(""), index);
  const tree = git(repo, ["write-tree"], undefined, index);
  const commit = git(repo, ["commit-tree", "-m", "agents", tree]);
  git(repo, ["update-ref", "refs/heads/main", commit]);
  commits.push(commit);
}
for (let i = 0; i < plan.agents; i++) {
  symlinkSync(
    join("..", "repos", `repo-${i % plan.repos}.git`),
    join(storage, "agents", `${agentName(i)}.git`),
  );
}

// --- the Gitaly test server, its own process on real time ---
const gitalyProc = fork(new URL("./gitaly-process.ts", import.meta.url).pathname, [storage], {
  execArgv: ["--import", "tsx"],
  stdio: ["ignore", "ignore", "inherit", "ipc"],
});
const [{ address }] = (await once(gitalyProc, "message")) as [{ address: string }];
type Counts = Record<string, number>;
async function gitalyCounts(): Promise<Counts> {
  gitalyProc.send("counts");
  for (;;) {
    const [m] = (await once(gitalyProc, "message")) as [{ counts?: Counts }];
    if (m.counts) return m.counts;
  }
}

// --- kas's side, on the virtual clock ---
const clock = new VirtualClock(Date.now() + 86_400_000); // ahead of real time: no deadline is ever in the past
clock.install();
const { Registry } = await import("prom-client");
const { createLogger } = await import("../../tool/observability/index.ts");
const { GitalyRepositories } = await import("../../cmd/kas/repositories/gitaly/index.ts");
const { RateLimitedRepositories } = await import("../../cmd/kas/repositories/rate-limited.ts");
const { createConfigurationMetrics } = await import("../../modules/agent_configuration/kas/metrics.ts");
const { ConfigurationWatches } = await import("../../modules/agent_configuration/kas/watches.ts");
type Reader = import("../../modules/runtime/index.ts").RepositoryReader;

const registry = new Registry();
const log = createLogger({ level: "error" });
const gitaly = new GitalyRepositories();
// In flight toward Gitaly (the driver lets these finish before moving the clock), and when each
// project was last polled (intervals between polls).
let inflight = 0;
let activity = 0;
let measuring = false;
const lastPoll = new Map<string, number>();
const intervals: number[] = [];
const track =
  <A extends unknown[], R>(kind: "ref" | "file", f: (...a: A) => Promise<R>) =>
  async (...a: A): Promise<R> => {
    if (kind === "ref") {
      const key = JSON.stringify(a[0]);
      const was = lastPoll.get(key);
      const now = Date.now();
      if (measuring && was !== undefined) intervals.push((now - was) / 1000);
      lastPoll.set(key, now);
    }
    inflight++;
    activity++;
    try {
      return await f(...a);
    } finally {
      inflight--;
      activity++;
    }
  };
const counted: Reader = {
  resolveRef: track("ref", (l, r, c) => gitaly.resolveRef(l, r, c)),
  readFile: track("file", (l, c, p, m, x) => gitaly.readFile(l, c, p, m, x)),
  readFiles: track("file", (l, c, p, m, x, t) => gitaly.readFiles(l, c, p, m, x, t)),
  listFiles: track("file", (l, c, d, x) => gitaly.listFiles(l, c, d, x)),
  close: () => gitaly.close(),
};
// kas's defaults (cmd/kas/repositories/config.ts): the process limits; no Redis, one replica.
const repositories = new RateLimitedRepositories(counted, { registry, log });
const watches = new ConfigurationWatches({
  repositories,
  pollPeriodMs: plan.pollPeriodS * 1000,
  maxFileBytes: 131072,
  metrics: createConfigurationMetrics(registry),
  log,
});

const t0 = clock.now();
let unread = plan.agents;
let allReadAt = -1;
for (let i = 0; i < plan.agents; i++) {
  const commit = commits[i % plan.repos]!;
  let read = false;
  watches.subscribe(
    {
      agentId: String(i + 1),
      projectId: String(100_000 + i),
      agentName: agentName(i),
      gitalyInfo: { address, features: {} },
      gitalyRepository: {
        storageName: "default",
        relativePath: `agents/${agentName(i)}.git`,
        glRepository: `project-${100_000 + i}`,
        glProjectPath: `bench/${agentName(i)}`,
      },
    },
    commit,
    (state) => {
      if (read || state.checkedAt === undefined) return;
      read = true;
      if (--unread === 0) allReadAt = (clock.now() - t0) / 1000;
    },
  );
}

const immediate = () => new Promise((r) => real.setImmediate(r));
/** Lets the calls started so far finish (real time), running timers due meanwhile at the current virtual time. */
async function settle(): Promise<void> {
  for (;;) {
    const seen = activity;
    await clock.advanceTo(clock.now());
    for (let k = 0; k < 3; k++) await immediate();
    if (inflight === 0 && seen === activity) return;
    if (inflight > 0) await new Promise((r) => real.setTimeout(r, 1));
  }
}

const STEP_MS = 1000;
const windowStart = t0 + (plan.simulateS - plan.windowS) * 1000;
const end = t0 + plan.simulateS * 1000;
let before: Counts | undefined;
let nextProgress = t0 + 300_000;
while (clock.now() < end) {
  if (before === undefined && clock.now() >= windowStart) {
    await settle();
    before = await gitalyCounts();
    measuring = true;
  }
  await clock.advanceTo(Math.min(end, clock.now() + STEP_MS));
  await settle();
  if (clock.now() >= nextProgress) {
    nextProgress += 300_000;
    process.stderr.write(
      `  steady: ${Math.round((clock.now() - t0) / 1000)} virtual s, ${Math.round((real.monotonic() - startedReal) / 1000)} real s\n`,
    );
  }
}
const after = await gitalyCounts();
before ??= {};
const windowCounts: Counts = Object.fromEntries(
  Object.entries(after).map(([k, v]) => [k, v - (before![k] ?? 0)]),
);
const windowCalls = Object.values(windowCounts).reduce((a, b) => a + b, 0);
const limited = await registry.getSingleMetric("kas_gitaly_rate_limited_total")!.get();
intervals.sort((a, b) => a - b);
const pct = (p: number) =>
  intervals[Math.min(intervals.length - 1, Math.floor((p / 100) * intervals.length))] ?? -1;
const result: SteadyResult = {
  agents: plan.agents,
  repos: plan.repos,
  pollPeriodS: plan.pollPeriodS,
  simulateS: plan.simulateS,
  windowS: plan.windowS,
  window: windowCounts,
  total: after,
  callsPerS: windowCalls / plan.windowS,
  callsPerAgentPerHour: (windowCalls / plan.windowS / plan.agents) * 3600,
  theoreticalPerS: plan.agents / plan.pollPeriodS,
  allReadAtS: allReadAt,
  pollIntervalP50S: pct(50),
  pollIntervalP90S: pct(90),
  rateLimited: Object.fromEntries(limited.values.map((v) => [String(v.labels.scope), v.value])),
  realSeconds: (real.monotonic() - startedReal) / 1000,
};
watches.close();
process.stdout.write(`${JSON.stringify(result)}\n`);
gitalyProc.kill("SIGTERM");
rmSync(dir, { recursive: true, force: true });
process.exit(0);
