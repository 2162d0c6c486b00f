// ConfigurationWatches against real git repositories: one ref lookup per poll per project however
// many agents it configures, the agents' files read together (one listing, one batch) only when the
// commit moved and kept for that commit, one agent's bad file refusing only that agent, first polls
// spread over the period for agents that already have a configuration, and problems that keep the
// last good one.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { LocalGitRepositories } from "../../../cmd/kas/repositories/local-git.ts";
import { createConfigurationMetrics } from "../../../modules/agent_configuration/kas/metrics.ts";
import type { AgentConfigurationState } from "../../../modules/agent_configuration/kas/state.ts";
import { ConfigurationWatches } from "../../../modules/agent_configuration/kas/watches.ts";
import { EMPTY_AGENT_CONFIGURATION } from "../../../modules/agentcfg/index.ts";
import {
  type AgentInfo,
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryReader,
} from "../../../modules/runtime/index.ts";
import { createLogger, type Logger } from "../../../tool/observability/index.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { until } from "../../support/until.ts";

/** A full collection (WeakRefs made in an earlier task are cleared by it). */
async function collectGarbage(): Promise<void> {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  gc();
}

/** The real local-git reader, counting calls by method. */
function counting(inner: RepositoryReader) {
  const calls = { resolveRef: 0, readFile: 0, readFiles: 0, listFiles: 0 };
  const reader: RepositoryReader = {
    resolveRef: (...a) => {
      calls.resolveRef++;
      return inner.resolveRef(...a);
    },
    readFile: (...a) => {
      calls.readFile++;
      return inner.readFile(...a);
    },
    readFiles: (...a) => {
      calls.readFiles++;
      return inner.readFiles(...a);
    },
    listFiles: (...a) => {
      calls.listFiles++;
      return inner.listFiles(...a);
    },
    close: () => inner.close(),
  };
  return { reader, calls };
}

const agent = (id: number, name: string, repo: GitRepo): AgentInfo => ({
  agentId: String(id),
  projectId: "7",
  agentName: name,
  localRepository: repo.path,
});

describe("configuration watches", () => {
  let repo: GitRepo;
  let watches: ConfigurationWatches;
  let calls: ReturnType<typeof counting>["calls"];
  let registry: Registry;
  const states = new Map<string, AgentConfigurationState>();

  const make = (
    pollPeriodMs: number,
    random = () => 0.5,
    options: { repositories?: RepositoryReader; maxProjectBytes?: number; log?: Logger } = {},
  ) => {
    const c = counting(options.repositories ?? new LocalGitRepositories());
    calls = c.calls;
    registry = new Registry();
    watches = new ConfigurationWatches({
      repositories: c.reader,
      pollPeriodMs,
      maxFileBytes: 1024,
      ...(options.maxProjectBytes !== undefined && { maxProjectBytes: options.maxProjectBytes }),
      metrics: createConfigurationMetrics(registry),
      log: options.log ?? createLogger({ level: "silent" }),
      random,
      lingerMs: 0,
    });
  };
  const follow = (a: AgentInfo, has = "") => watches.subscribe(a, has, (s) => states.set(s.agentId, s));

  beforeEach(async () => {
    states.clear();
    repo = await GitRepo.init();
  });
  afterEach(async () => {
    vi.useRealTimers();
    watches?.close();
    await repo.remove();
  });

  test("agents sharing a project share its polls; files are read only when the commit moved", async () => {
    const files = {
      ".gitlab/agents/a/config.yaml": "observability: {logging: {level: debug}}\n",
      ".gitlab/agents/b/config.yaml": "observability: {logging: {level: warn}}\n",
    };
    const first = await repo.commit(files);
    make(3_600_000);
    const agents = [agent(1, "a", repo), agent(2, "b", repo), agent(3, "c", repo)];
    const stops = agents.map((a) => follow(a));
    await until(() => states.size === 3, 10_000, "three states");
    expect(watches.size).toBe(1);
    expect(states.get("1")).toMatchObject({
      commitId: first,
      configuration: { observability: { logging: { level: "debug" } } },
    });
    expect(states.get("2")?.configuration.observability.logging.level).toBe("warn");
    expect(states.get("3")).toMatchObject({
      commitId: first,
      configuration: { observability: { logging: { level: "info" } } },
    });
    const afterFirst = { ...calls };
    // The three agents' files: one listing and one batch (c has none: the empty configuration).
    expect(afterFirst).toMatchObject({ listFiles: 1, readFiles: 1, readFile: 0 });

    // Nothing moved: a push polls once (one ref lookup for three agents), reads nothing.
    expect(watches.pushed({ id: "7" })).toBe(1);
    await until(() => calls.resolveRef > afterFirst.resolveRef, 10_000, "poll");
    await until(async () => (await pollsWith("unchanged")) >= 1, 10_000, "poll done");
    expect(calls).toEqual({ ...afterFirst, resolveRef: afterFirst.resolveRef + 1 });

    // A new commit: one lookup, then the files together once more.
    const second = await repo.commit({
      ...files,
      ".gitlab/agents/b/config.yaml": "observability: {logging: {level: error}}\n",
    });
    watches.pushed({ id: "7" });
    await until(() => states.get("2")?.commitId === second, 10_000, "second commit");
    await until(
      () => states.get("1")?.commitId === second && states.get("3")?.commitId === second,
      10_000,
      "all",
    );
    expect(calls).toEqual({ resolveRef: afterFirst.resolveRef + 2, listFiles: 2, readFiles: 2, readFile: 0 });
    expect(states.get("2")?.configuration.observability.logging.level).toBe("error");

    for (const stop of stops) stop();
    await until(() => watches.size === 0, 5_000, "watch forgotten after its agents' streams ended");
    expect(watches.pushed({ id: "7" })).toBe(0);
  });

  test("agents arriving one after another (a herd): the first alone reads its own file, the second the project's files together, the others nothing", async () => {
    const N = 20;
    const manifest = (i: number) => `group/manifests-${i}`;
    const files: Record<string, string> = { ".gitlab/agents/a0/manifests/x.yaml": "kind: ConfigMap\n" };
    for (let i = 0; i < N; i++) {
      files[`.gitlab/agents/a${i}/config.yaml`] = `gitops: {manifest_projects: [{id: ${manifest(i)}}]}\n`;
    }
    const commit = await repo.commit(files);
    make(3_600_000);
    for (let i = 0; i < N; i++) {
      follow(agent(i, `a${i}`, repo));
      await until(() => states.get(String(i))?.commitId === commit, 10_000, `agent ${i}`);
      expect(states.get(String(i))?.configuration.gitops?.manifest_projects[0]?.id).toBe(manifest(i));
    }
    follow(agent(N, "without-a-file", repo));
    await until(() => states.get(String(N))?.commitId === commit, 10_000, "the agent without a file");
    expect(states.get(String(N))?.configuration.gitops).toBeUndefined();
    expect(calls).toEqual({ resolveRef: 1, readFile: 1, listFiles: 1, readFiles: 1 });
  });

  test("a project with one agent here reads its file with one call at each commit, never a listing and a batch", async () => {
    const c1 = await repo.commit({
      ".gitlab/agents/a/config.yaml": "observability: {logging: {level: warn}}\n",
    });
    make(3_600_000);
    follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === c1, 10_000, "a at c1");
    const c2 = await repo.commit({
      ".gitlab/agents/a/config.yaml": "observability: {logging: {level: error}}\n",
    });
    watches.pushed({ id: "7" });
    await until(() => states.get("1")?.commitId === c2, 10_000, "a at c2");
    expect(states.get("1")?.configuration.observability.logging.level).toBe("error");
    expect(calls).toEqual({ resolveRef: 2, readFile: 2, listFiles: 0, readFiles: 0 });
  });

  test("a file over maxFileBytes, or not valid, refuses only its agent; the others get theirs", async () => {
    const big = `# ${"x".repeat(2000)}\n{}\n`;
    const commit = await repo.commit({
      ".gitlab/agents/a/config.yaml": "observability: {logging: {level: debug}}\n",
      ".gitlab/agents/b/config.yaml": big,
      ".gitlab/agents/c/config.yaml": "observability: [unclosed\n",
      ".gitlab/agents/d/config.yaml": big,
      ".gitlab/agents/e/config.yaml": "observability: {logging: {level: warn}}\n",
    });
    const lines: string[] = [];
    const log = createLogger({
      level: "info",
      destination: { write: (line: string) => void lines.push(line) },
    });
    make(3_600_000, () => 0.5, { log });
    for (const [i, name] of ["a", "b", "c", "d", "e"].entries()) follow(agent(i + 1, name, repo));
    await until(() => states.size === 5 && [...states.values()].every((s) => s.checkedAt), 10_000, "all");
    expect(states.get("1")).toMatchObject({
      commitId: commit,
      configuration: { observability: { logging: { level: "debug" } } },
    });
    expect(states.get("5")).toMatchObject({
      commitId: commit,
      configuration: { observability: { logging: { level: "warn" } } },
    });
    for (const [id, name] of [
      ["2", "b"],
      ["4", "d"],
    ]) {
      expect(states.get(id)?.problem).toMatchObject({
        kind: "invalid",
        commitId: commit,
        message: `.gitlab/agents/${name}/config.yaml is larger than the 1024 bytes allowed`,
      });
    }
    expect(states.get("3")?.problem).toMatchObject({ kind: "invalid", commitId: commit });
    expect(states.get("3")?.problem?.message).toContain(".gitlab/agents/c/config.yaml");
    expect(states.get("3")?.problem?.message).not.toContain("larger");
    // Each oversized file was left out of one more batch; no agent read its file on its own.
    expect(calls).toMatchObject({ listFiles: 1, readFiles: 3, readFile: 0 });
    expect(await registry.getSingleMetricAsString("kas_agent_configuration_invalid_total")).toMatch(/ 3$/m);
    expect(lines.filter((l) => l.includes("agent configuration refused"))).toHaveLength(3);
    expect(lines.filter((l) => l.includes("one agent at a time"))).toEqual([]); // read together
  });

  test("past 3 oversized files, or past maxProjectBytes, each agent reads its own file", async () => {
    const big = `# ${"x".repeat(2000)}\n{}\n`;
    const files: Record<string, string> = {
      ".gitlab/agents/ok/config.yaml": "observability: {logging: {level: warn}}\n",
    };
    for (const name of ["b1", "b2", "b3", "b4"]) files[`.gitlab/agents/${name}/config.yaml`] = big;
    const commit = await repo.commit(files);
    const lines: string[] = [];
    const log = createLogger({
      level: "info",
      destination: { write: (line: string) => void lines.push(line) },
    });
    make(3_600_000, () => 0.5, { log });
    const names = ["ok", "b1", "b2", "b3", "b4"];
    // One after another: agents joining during a poll would have it run again, and that poll and
    // a joining agent may each read the agent's file (per agent, reads are not shared).
    for (const [i, name] of names.entries()) {
      follow(agent(i + 1, name, repo));
      await until(() => states.get(String(i + 1))?.checkedAt !== undefined, 10_000, name);
    }
    expect(states.get("1")).toMatchObject({
      commitId: commit,
      configuration: { observability: { logging: { level: "warn" } } },
    });
    for (const [i, name] of names.entries()) {
      if (i === 0) continue;
      expect(states.get(String(i + 1))?.problem?.message).toBe(
        `.gitlab/agents/${name}/config.yaml is larger than the 1024 bytes allowed`,
      );
    }
    // Three left out, the fourth gave up on batching: then one read per agent, said once.
    expect(calls).toEqual({ resolveRef: 1, listFiles: 1, readFiles: 4, readFile: 5 });
    const said = lines.filter((l) => l.includes("agent configuration files are read one agent at a time"));
    expect(said).toHaveLength(1);
    expect(JSON.parse(said[0]!)).toMatchObject({ commitId: commit, reason: expect.stringContaining("b4") });
    // An agent joining later at the same commit reads its own file, without listing again.
    follow(agent(6, "late", repo));
    await until(() => states.get("6")?.commitId === commit, 10_000, "late agent");
    expect(calls).toEqual({ resolveRef: 1, listFiles: 1, readFiles: 4, readFile: 6 });

    // The files together over maxProjectBytes (the default: 1 MiB): per agent from the first batch.
    watches.close();
    states.clear();
    make(3_600_000, () => 0.5, { maxProjectBytes: 40 }); // a's and b's files: 42 bytes
    const second = await repo.commit({
      ".gitlab/agents/a/config.yaml": "observability: {logging: {level: debug}}\n",
      ".gitlab/agents/b/config.yaml": "{}\n",
    });
    follow(agent(1, "a", repo));
    follow(agent(2, "b", repo));
    await until(
      () => states.get("1")?.commitId === second && states.get("2")?.commitId === second,
      10_000,
      "a and b",
    );
    expect(states.get("1")?.configuration.observability.logging.level).toBe("debug");
    expect(calls).toMatchObject({ listFiles: 1, readFiles: 1, readFile: 2 });
  });

  test.each(["the new batch fails", "the branch is deleted"] as const)(
    "a watch keeps only its commit's files: a moved commit drops them (%s)",
    async (how) => {
      const c1 = await repo.commit({
        ".gitlab/agents/a/config.yaml": "observability: {logging: {level: debug}}\n",
        ".gitlab/agents/b/config.yaml": "{}\n",
      });
      const inner = new LocalGitRepositories();
      let kept: WeakRef<Buffer> | undefined;
      const reader: RepositoryReader = {
        ...counting(inner).reader,
        readFiles: async (location, commit, paths, max, ctx, total) => {
          if (commit !== c1) throw new RepositoryError("unavailable", "GetBlobs: try again later");
          const files = await inner.readFiles(location, commit, paths, max, ctx, total);
          kept = new WeakRef(files.get(paths[0]!)!);
          return files;
        },
      };
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] }); // no retry after the failed poll
      make(3_600_000, () => 0.5, { repositories: reader });
      follow(agent(1, "a", repo));
      follow(agent(2, "b", repo)); // two agents: the files are read together (one alone reads its own)
      await until(
        () => states.get("1")?.commitId === c1 && states.get("2")?.commitId === c1,
        10_000,
        "at c1",
      );
      await collectGarbage();
      expect(kept?.deref(), "kept for agents joining at c1").toBeDefined();
      if (how === "the new batch fails") {
        await repo.commit({ ".gitlab/agents/a/config.yaml": "{}\n" });
        watches.pushed({ id: "7" });
        await until(() => states.get("1")?.problem?.kind === "repository", 10_000, "the new batch failed");
        // The agent keeps its configuration and learns why.
        expect(states.get("1")).toMatchObject({
          commitId: c1,
          configuration: { observability: { logging: { level: "debug" } } },
        });
        expect(states.get("1")?.problem?.message).toContain("try again later");
      } else {
        await repo.git(["update-ref", "-d", `refs/heads/${repo.initialBranch}`]);
        watches.pushed({ id: "7" });
        await until(() => states.get("1")?.commitId === "", 10_000, "no commit: the empty configuration");
      }
      await collectGarbage();
      expect(kept?.deref()).toBeUndefined();
    },
  );

  test("agents joining while the batch is under way share it; it is charged to the agent it was read for, and abandoned when kas stops", async () => {
    const c1 = await repo.commit({
      ".gitlab/agents/a/config.yaml": "{}\n",
      ".gitlab/agents/b/config.yaml": "observability: {logging: {level: warn}}\n",
    });
    const inner = new LocalGitRepositories();
    const asked: RepositoryCallContext[] = [];
    let release!: () => void;
    let held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let settled: Promise<unknown> = Promise.resolve();
    const reader: RepositoryReader = {
      ...counting(inner).reader,
      readFiles: (location, commit, paths, max, ctx, total) => {
        asked.push(ctx);
        const files = held.then(() => {
          if (ctx.signal?.aborted) throw new RepositoryError("aborted", "repository read abandoned");
          return inner.readFiles(location, commit, paths, max, ctx, total);
        });
        settled = files.catch(() => {});
        return files;
      },
    };
    make(3_600_000, () => 0.5, { repositories: reader });
    follow(agent(1, "a", repo));
    follow(agent(2, "b", repo)); // two agents: the files are read together
    await until(() => asked.length === 1, 10_000, "the batch under way");
    for (const [i, name] of ["c", "d"].entries()) follow(agent(i + 3, name, repo));
    release();
    await until(() => [1, 2, 3, 4].every((i) => states.get(String(i))?.commitId === c1), 10_000, "all at c1");
    expect(states.get("2")?.configuration.observability.logging.level).toBe("warn");
    expect(calls).toMatchObject({ listFiles: 1, readFiles: 1, readFile: 0 });
    expect(asked.map((c) => c.agentId)).toEqual(["1"]);

    held = new Promise<void>((resolve) => {
      release = resolve;
    });
    await repo.commit({ ".gitlab/agents/a/config.yaml": "gitops: {}\n" });
    watches.pushed({ id: "7" });
    await until(() => asked.length === 2, 10_000, "the next batch under way");
    expect(asked[1]!.signal?.aborted).toBe(false);
    watches.close();
    expect(asked[1]!.signal?.aborted).toBe(true);
    release();
    await settled;
    await new Promise((resolve) => setImmediate(resolve));
    // Abandoned, not failed: nothing counted, no agent told of a problem.
    expect(await failures()).toBe(0);
    expect(states.get("1")?.problem).toBeUndefined();
  });

  test("a failing batch is one attempt per poll however many agents, retried soon; every agent keeps its configuration", async () => {
    const c1 = await repo.commit({
      ".gitlab/agents/a/config.yaml": "{}\n",
      ".gitlab/agents/b/config.yaml": "{}\n",
    });
    const inner = new LocalGitRepositories();
    const reader: RepositoryReader = {
      ...counting(inner).reader,
      readFiles: async (location, commit, paths, max, ctx, total) => {
        if (commit !== c1) throw new RepositoryError("unavailable", "GetBlobs: try again later");
        return inner.readFiles(location, commit, paths, max, ctx, total);
      },
    };
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    make(3_600_000, () => 0.5, { repositories: reader });
    follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === c1, 10_000, "a at c1");
    for (const [i, name] of ["b", "c"].entries()) follow(agent(i + 2, name, repo));
    await until(() => [2, 3].every((i) => states.get(String(i))?.commitId === c1), 10_000, "b and c at c1");
    await repo.commit({ ".gitlab/agents/a/config.yaml": "gitops: {}\n" });
    watches.pushed({ id: "7" });
    await until(async () => (await failures()) === 1, 10_000, "the batch failed");
    // a alone read its own file; b's joining read the files together at c1; the push, at c2.
    expect(calls).toMatchObject({ listFiles: 2, readFiles: 2, readFile: 1 });
    for (const id of ["1", "2", "3"]) {
      expect(states.get(id)).toMatchObject({ commitId: c1, problem: { kind: "repository" } });
    }
    await vi.advanceTimersByTimeAsync(950);
    expect(calls.readFiles).toBe(2);
    await vi.advanceTimersByTimeAsync(100);
    await until(async () => (await failures()) === 2, 10_000, "retried after 1 s, failing again");
    expect(calls).toMatchObject({ listFiles: 3, readFiles: 3, readFile: 1 });
  });

  test("an agent that has a configuration waits for the project's first poll, spread over the period", async () => {
    const commit = await repo.commit({ ".gitlab/agents/a/config.yaml": "{}\n" });
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    make(300_000, () => 0.25);
    follow(agent(1, "a", repo), commit); // reconnected after a kas restart: it has this commit
    await vi.advanceTimersByTimeAsync(74_000);
    expect(calls.resolveRef).toBe(0);
    await vi.advanceTimersByTimeAsync(2_000); // 0.25 of the period
    vi.useRealTimers();
    await until(() => states.get("1")?.commitId === commit, 10_000, "first poll");
    expect(calls.resolveRef).toBe(1);
  });

  test("an agent without a configuration is polled at once", async () => {
    const commit = await repo.commit({ ".gitlab/agents/a/config.yaml": "{}\n" });
    make(300_000, () => 0.99);
    follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === commit, 10_000, "first poll");
  });

  test("polls repeat every period; an unreadable repository keeps the last good configuration and says why", async () => {
    const commit = await repo.commit({
      ".gitlab/agents/a/config.yaml": "observability: {logging: {level: debug}}\n",
    });
    make(50);
    follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === commit, 10_000, "first poll");
    const seen = calls.resolveRef;
    await until(() => calls.resolveRef >= seen + 3, 10_000, "periodic polls");
    await repo.remove(); // the repository is gone
    await until(() => states.get("1")?.problem?.kind === "repository", 10_000, "problem");
    expect(states.get("1")).toMatchObject({
      commitId: commit,
      configuration: { observability: { logging: { level: "debug" } } },
    });
    expect([...watches.failing().values()][0]).toContain("not");
    expect(await registry.getSingleMetricAsString("kas_agent_configuration_repository_errors_total")).toMatch(
      /code="not_found"\} [1-9]/,
    );
    repo = await GitRepo.init(); // for afterEach
  });

  test("after a failed poll the next comes soon (1 s, then 2 s, …), not a period later", async () => {
    const gone = await GitRepo.init();
    await gone.remove(); // a repository that is not there: every poll fails
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    make(3_600_000, () => 0.5);
    follow(agent(1, "a", gone));
    await until(async () => (await failures()) === 1, 10_000, "first failure");
    expect(calls.resolveRef).toBe(1);
    await vi.advanceTimersByTimeAsync(990);
    expect(calls.resolveRef).toBe(1);
    await vi.advanceTimersByTimeAsync(20);
    await until(() => calls.resolveRef === 2, 10_000, "retry after 1 s");
    await until(async () => (await failures()) === 2, 10_000, "second failure");
    await vi.advanceTimersByTimeAsync(1_900);
    expect(calls.resolveRef).toBe(2);
    await vi.advanceTimersByTimeAsync(200);
    await until(() => calls.resolveRef === 3, 10_000, "retry after 2 s");
  });

  test.each(["succeeds", "fails"] as const)(
    "a read that loses the race with a newer poll's is dropped (it %s late): an agent never steps back a commit",
    async (late) => {
      const c1 = await repo.commit({
        ".gitlab/agents/a/config.yaml": "{}\n",
        ".gitlab/agents/b/config.yaml": "{}\n",
      });
      // At c1 the first batch fails (the poll's), the second (b's, on joining) is held until released.
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let heldStarted = false;
      let heldDone!: () => void;
      const heldRead = new Promise<void>((resolve) => {
        heldDone = resolve;
      });
      let atC1 = 0;
      const inner = new LocalGitRepositories();
      const reader: RepositoryReader = {
        ...counting(inner).reader,
        readFiles: async (location, commit, paths, max, ctx, total) => {
          if (commit !== c1) return inner.readFiles(location, commit, paths, max, ctx, total);
          if (++atC1 === 1) throw new RepositoryError("unavailable", "GetBlobs: try again later");
          heldStarted = true;
          await held;
          const files =
            late === "succeeds" && (await inner.readFiles(location, commit, paths, max, ctx, total));
          setImmediate(heldDone); // once the watch has had the result
          if (!files) throw new RepositoryError("unavailable", "GetBlobs: too late");
          return files;
        },
      };
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] }); // no retry after the failed poll
      make(3_600_000, () => 0.5, { repositories: reader });
      // Two agents, so the files are read together; z (which has a commit) asks for no poll at once.
      follow(agent(4, "z", repo), "an-older-commit");
      follow(agent(1, "a", repo));
      await until(() => states.get("1")?.problem?.kind === "repository", 10_000, "a's first batch failed");
      const seenByB: (string | undefined)[] = [];
      watches.subscribe(agent(2, "b", repo), "", (state) => seenByB.push(state.commitId));
      await until(() => heldStarted, 10_000, "b's read of c1 under way");
      const c2 = await repo.commit({
        ".gitlab/agents/a/config.yaml": "{}\n",
        ".gitlab/agents/b/config.yaml": "gitops: {}\n",
      });
      watches.pushed({ id: "7" });
      await until(() => seenByB.includes(c2) && states.get("1")?.commitId === c2, 10_000, "a and b at c2");
      release();
      await heldRead;
      expect(seenByB.filter((c) => c !== undefined)).toEqual([c2]);
      expect(watches.stateOf("2")?.commitId).toBe(c2);
      // Nor does c1's read touch what the watch keeps (c2's files): an agent joining now reads
      // nothing, and gets c2.
      const before = { ...calls };
      follow(agent(3, "c", repo));
      await until(() => states.get("3")?.commitId === c2, 10_000, "c at c2");
      expect(calls).toEqual(before);
    },
  );

  test("an agent between two streams keeps its watch and state for the linger time", async () => {
    const commit = await repo.commit({ ".gitlab/agents/a/config.yaml": "{}\n" });
    const c = counting(new LocalGitRepositories());
    watches = new ConfigurationWatches({
      repositories: c.reader,
      pollPeriodMs: 3_600_000,
      maxFileBytes: 1024,
      metrics: createConfigurationMetrics(new Registry()),
      log: createLogger({ level: "silent" }),
      lingerMs: 60_000,
    });
    const stop = follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === commit, 10_000, "first read");
    stop(); // the tunnel went; the agent comes back on another one
    expect(watches.stateOf("1")?.commitId).toBe(commit);
    const again: AgentConfigurationState[] = [];
    watches.subscribe(agent(1, "a", repo), commit, (state) => again.push(state));
    expect(again.map((s) => s.commitId)).toEqual([commit]); // known at once, nothing read again
    // The watch's only agent read its own file: one call, not a listing and a batch.
    expect(c.calls).toEqual({ resolveRef: 1, readFile: 1, listFiles: 0, readFiles: 0 });
    expect(watches.size).toBe(1);
  });

  test("while an agent's state lingers, its departed stream's listener is not kept", async () => {
    const commit = await repo.commit({ ".gitlab/agents/a/config.yaml": "{}\n" });
    watches = new ConfigurationWatches({
      repositories: new LocalGitRepositories(),
      pollPeriodMs: 3_600_000,
      maxFileBytes: 1024,
      metrics: createConfigurationMetrics(new Registry()),
      log: createLogger({ level: "silent" }),
      lingerMs: 60_000,
    });
    // The listener stands for the stream (and through it the tunnel) that subscribed.
    const subscribeAndLeave = async () => {
      const stream = { states: [] as AgentConfigurationState[] };
      const stop = watches.subscribe(agent(1, "a", repo), "", (s) => stream.states.push(s));
      await until(() => stream.states.at(-1)?.commitId === commit, 10_000, "first read");
      stop();
      return new WeakRef(stream);
    };
    const departed = await subscribeAndLeave();
    expect(watches.stateOf("1")?.commitId).toBe(commit); // lingering
    await collectGarbage();
    expect(departed.deref(), "the linger timer holds the departed stream").toBeUndefined();
    expect(watches.stateOf("1")?.commitId).toBe(commit);
  });

  test("a project over maxProjectBytes is read per agent: a file that cannot be read is retried with growing delays, and the other agents' files still are read", async () => {
    const commit = await repo.commit({
      ".gitlab/agents/a/config.yaml": "{}\n",
      ".gitlab/agents/b/config.yaml": "{}\n",
    });
    const inner = new LocalGitRepositories();
    let reads = 0;
    const reader: RepositoryReader = {
      ...counting(inner).reader,
      readFile: async (location, c, path, max, ctx) => {
        if (path.includes("/a/")) {
          reads++;
          throw new RepositoryError("unavailable", "TreeEntry refused: too many requests");
        }
        return inner.readFile(location, c, path, max, ctx);
      },
    };
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    make(3_600_000, () => 0.5, { repositories: reader, maxProjectBytes: 5 }); // the two files: 6 bytes
    follow(agent(1, "a", repo));
    follow(agent(2, "b", repo));
    await until(() => states.get("2")?.commitId === commit && reads >= 1, 10_000, "b read, a failed");
    await until(async () => (await failures()) >= 1, 10_000, "failure counted");
    // A poll counts a's failure before it has read b's file (real git), and b's subscription may
    // have asked for a second poll at once: the retry is armed only when the polls are done, and
    // the clock must not move before that (the retry is the only fake timer).
    const retryArmed = () => until(() => vi.getTimerCount() === 1, 10_000, "the retry armed");
    await retryArmed();
    for (let retry = 0; retry < 3; retry++) {
      const before = reads; // every read of a's file failed, and was counted
      expect(await failures()).toBe(before);
      const delay = 1_000 * 2 ** (before - 1); // 1 s after one failure, doubling
      await vi.advanceTimersByTimeAsync(delay - 50);
      expect(vi.getTimerCount(), `no retry before ${delay} ms`).toBe(1);
      await vi.advanceTimersByTimeAsync(100);
      expect(vi.getTimerCount(), `the retry at ${delay} ms`).toBe(0); // fired: its poll under way
      await until(() => reads === before + 1, 10_000, `retry after ${delay} ms`);
      await until(async () => (await failures()) === before + 1, 10_000, "counted");
      await retryArmed();
    }
    expect(states.get("1")?.problem?.kind).toBe("repository");
    // The project was listed and batched once: its commit is known to be read per agent.
    expect(calls).toMatchObject({ listFiles: 1, readFiles: 1 });
  });
  test("a project without the agent's file, or without commits, is the empty configuration", async () => {
    make(3_600_000);
    follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === "", 10_000, "empty repository");
    expect(states.get("1")?.configuration).toEqual(EMPTY_AGENT_CONFIGURATION);
    const commit = await repo.commit({ "README.md": "hi\n" });
    watches.pushed({ id: "7" });
    await until(() => states.get("1")?.commitId === commit, 10_000, "no file");
    expect(states.get("1")?.problem).toBeUndefined();
    expect(states.get("1")?.configuration.gitops).toBeUndefined();
  });

  async function failures(): Promise<number> {
    const text = await registry.getSingleMetricAsString("kas_agent_configuration_repository_errors_total");
    return Number(/\} (\d+)/.exec(text)?.[1] ?? 0);
  }

  async function pollsWith(result: string): Promise<number> {
    const text = await registry.getSingleMetricAsString("kas_agent_configuration_polls_total");
    return Number(new RegExp(`result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
  }
});
