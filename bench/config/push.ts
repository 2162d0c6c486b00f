// Part 1 of bench:config: git push -> configuration applied in agentk. kas replicas A and B share
// a real redis-server; a third kas, C, runs alone without Redis. Three agentk run in this process,
// two connected to A, one to C, each with its own configuration project (a local git repository).
// A round is a real commit to one project, then GitLab's push notification
// (POST /api/v1/notifications/git_push); the time runs from the POST until agentk's
// `agent.configuration` holds the new commit's configuration (a marker unique to the round, in
// `ci_access`). Paths:
//  - "B": the push to replica B; its broadcast crosses Redis to A, which polls and streams the file;
//  - "A": the push to replica A, which holds the agent (kas publishes every push to Redis, so this
//    too goes through Redis pub/sub: the same hop, minus the other replica);
//  - "C": the push to a single kas without Redis (in-process broadcast): no Redis at all.
// Rounds rotate the paths (one agent each, so that all see the same machine), paced so that no
// agent should pass kas's per-agent Gitaly limit (1/s, burst 10, in Redis; a poll costs two calls:
// the ref, then the file); rounds in which kas still deferred a call for a rate limit are counted.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { AgentConfiguration } from "../../modules/agentcfg/index.ts";
import { gitlabJwt, OTHER_TOKEN, THIRD_TOKEN, TOKEN } from "../../test/kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../test/kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../test/support/agentk-in-process.ts";
import { GitRepo } from "../../test/support/git-repo.ts";
import { RedisServer } from "../../test/support/redis-server.ts";
import { createLogger } from "../../tool/observability/index.ts";
import { notifyGitPush } from "../lib/git-push.ts";

export interface PushOptions {
  /** Rounds per path. */
  rounds: number;
  /** Least time between the starts of two rounds. */
  paceMs: number;
  log: (line: string) => void;
}

export type PushPath = "B" | "A" | "C";

export interface PushResult {
  /** Latencies per path (ms); absent for a path that could not be measured. */
  ms: Partial<Record<PushPath, number[]>>;
  /** Why a path could not be measured. */
  failed: Partial<Record<PushPath, string>>;
  /** kas_gitaly_rate_limited_total on A and C during the rounds (calls that had to wait). */
  rateLimitWaits: number;
  /** Rounds during which kas deferred a Gitaly call for a rate limit, per path. */
  deferredRounds: Partial<Record<PushPath, number>>;
}

const FILE = (name: string) => `.gitlab/agents/${name}/config.yaml`;
const config = (marker: string) => `ci_access:\n  groups:\n    - id: ${marker}\n`;
const markerOf = (c: AgentConfiguration | undefined) => c?.ci_access?.groups?.[0]?.id;

export async function measurePush(o: PushOptions): Promise<PushResult> {
  const dir = await mkdtemp(join(tmpdir(), "bench-config-push-"));
  const redis = await RedisServer.start();
  const repos: GitRepo[] = [];
  const kases: InProcessKas[] = [];
  const agents: InProcessAgentk[] = [];
  const abort = new AbortController();
  const result: PushResult = {
    ms: {},
    failed: {},
    rateLimitWaits: 0,
    deferredRounds: {},
  };
  try {
    const paths = [
      { path: "B", token: TOKEN, id: 42, project: 7, name: "prod" },
      { path: "A", token: OTHER_TOKEN, id: 43, project: 8, name: "staging" },
      { path: "C", token: THIRD_TOKEN, id: 44, project: 9, name: "qa" },
    ] as const;
    const repoOf = new Map<PushPath, GitRepo>();
    for (const p of paths) {
      const repo = await GitRepo.init();
      repos.push(repo);
      repoOf.set(p.path, repo);
      await repo.commit({ [FILE(p.name)]: config("bench/start") });
    }
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      paths
        .map(
          (p) =>
            `${p.token}: {agentId: ${p.id}, projectId: ${p.project}, agentName: ${p.name}, repository: ${JSON.stringify(repoOf.get(p.path)!.path)}}`,
        )
        .join("\n"),
    );
    // kas's defaults but the poll period: an hour, so that only the notification brings a change.
    const start = (withRedis: boolean) =>
      startInProcessKas(
        (c) => {
          c.agent.staticTokensFile = tokensFile;
          c.agent.configuration.pollPeriodMs = 3_600_000;
        },
        withRedis ? { redis: { host: redis.host, port: redis.port } } : {},
      );
    const a = await start(true);
    kases.push(a);
    const b = await start(true);
    kases.push(b);
    const c = await start(false);
    kases.push(c);
    const target = { B: b, A: a, C: c } as const;
    // agentk sets its log level from the configuration: its lines go nowhere.
    const quiet = () => createLogger({ level: "info", destination: { write: () => true } });
    for (const p of paths) {
      const kasUrl = (p.path === "C" ? c : a).addresses.agent;
      agents.push(await startInProcessAgentk({ kasUrl, token: p.token, log: quiet() }));
    }

    // Each agentk's applied configurations, as they come: the time the marker first showed.
    const waiters = new Map<string, (t: number) => void>();
    for (const agent of agents) {
      void (async () => {
        for await (const cfg of agent.agent.configuration.watch(abort.signal)) {
          const t = performance.now();
          const m = markerOf(cfg);
          if (m !== undefined) waiters.get(m)?.(t);
        }
      })();
    }
    const appliedAt = (marker: string, timeoutMs: number) =>
      new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(marker);
          reject(new Error(`${marker} was not applied within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.set(marker, (t) => {
          clearTimeout(timer);
          waiters.delete(marker);
          resolve(t);
        });
      });
    for (const agent of agents) {
      const until = Date.now() + 15_000;
      while (markerOf(agent.agent.configuration.current) !== "bench/start") {
        if (Date.now() > until) throw new Error("agentk did not get its first configuration");
        await sleep(20);
      }
    }
    o.log(`  push: kas A, B on Redis ${redis.port}, C alone; each agentk has its configuration`);

    const jwts = new Map<InProcessKas, string>();
    const push = async (kas: InProcessKas, projectId: number) => {
      let jwt = jwts.get(kas);
      if (jwt === undefined) {
        jwt = await gitlabJwt(kas.apiSecret);
        jwts.set(kas, jwt);
      }
      await notifyGitPush(kas.addresses.api, jwt, { id: projectId });
    };
    const waits = async () => {
      let n = 0;
      for (const kas of [a, c]) {
        const text = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
        for (const m of text.matchAll(/^kas_gitaly_rate_limited_total\{[^}]*\} (\S+)$/gm)) n += Number(m[1]);
      }
      return n;
    };

    // Warm-up, one round per path, not counted: until both replicas' Redis clients are connected
    // and subscribed, a push may be refused (503) or published before A listens (lost). A path
    // that does not work within 15 attempts is reported failed and left out of the rounds.
    for (const p of paths) {
      const repo = repoOf.get(p.path)!;
      for (let attempt = 1; ; attempt++) {
        const marker = `bench/warmup-${p.name}-${attempt}`;
        await repo.commit({ [FILE(p.name)]: config(marker) });
        const applied = appliedAt(marker, 2_000);
        try {
          await push(target[p.path], p.project);
          await applied;
          result.ms[p.path] = [];
          break;
        } catch (err) {
          await applied.catch(() => {});
          if (attempt >= 15) {
            result.failed[p.path] = (err as Error).message;
            o.log(`  push: path ${p.path} does not work: ${(err as Error).message}`);
            break;
          }
        }
      }
    }
    const live = paths.filter((p) => result.ms[p.path] !== undefined);
    await sleep(o.paceMs);
    const waits0 = await waits();
    let waitsBefore = waits0;
    for (let i = 0; i < live.length * o.rounds; i++) {
      if (i % 30 === 0) jwts.clear(); // signed anew now and then (they expire)
      const began = performance.now();
      const p = live[i % live.length]!;
      const marker = `bench/round-${i}`;
      await repoOf.get(p.path)!.commit({ [FILE(p.name)]: config(marker) });
      const applied = appliedAt(marker, 30_000);
      const t0 = performance.now();
      await push(target[p.path], p.project);
      result.ms[p.path]!.push((await applied) - t0);
      // Outside the timed part: did this round wait for a rate limit?
      const waitsAfter = await waits();
      if (waitsAfter > waitsBefore) result.deferredRounds[p.path] = (result.deferredRounds[p.path] ?? 0) + 1;
      waitsBefore = waitsAfter;
      const rest = o.paceMs - (performance.now() - began);
      if (rest > 0) await sleep(rest);
    }
    result.rateLimitWaits = (await waits()) - waits0;
    return result;
  } finally {
    abort.abort();
    await Promise.all(agents.map((x) => x.stop()));
    for (const k of kases) await k.close();
    await redis.close();
    await Promise.all(repos.map((r) => r.remove()));
    await rm(dir, { recursive: true, force: true });
  }
}
