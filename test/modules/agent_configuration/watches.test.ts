// ConfigurationWatches against real git repositories: one ref lookup per poll per project however
// many agents it configures, a file read only when the commit moved, first polls spread over the
// period for agents that already have a configuration, and problems that keep the last good one.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { LocalGitRepositories } from "../../../cmd/kas/repositories/local-git.ts";
import { createConfigurationMetrics } from "../../../modules/agent_configuration/kas/metrics.ts";
import type { AgentConfigurationState } from "../../../modules/agent_configuration/kas/state.ts";
import { ConfigurationWatches } from "../../../modules/agent_configuration/kas/watches.ts";
import { type AgentInfo, RepositoryError, type RepositoryReader } from "../../../modules/runtime/index.ts";
import { createLogger } from "../../../tool/observability/index.ts";
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

  const make = (pollPeriodMs: number, random = () => 0.5) => {
    const c = counting(new LocalGitRepositories());
    calls = c.calls;
    registry = new Registry();
    watches = new ConfigurationWatches({
      repositories: c.reader,
      pollPeriodMs,
      maxFileBytes: 1024,
      metrics: createConfigurationMetrics(registry),
      log: createLogger({ level: "silent" }),
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
    expect(afterFirst.readFile).toBe(3);

    // Nothing moved: a push polls once (one ref lookup for three agents), reads nothing.
    expect(watches.pushed({ id: "7" })).toBe(1);
    await until(() => calls.resolveRef > afterFirst.resolveRef, 10_000, "poll");
    await until(async () => (await pollsWith("unchanged")) >= 1, 10_000, "poll done");
    expect(calls.resolveRef).toBe(afterFirst.resolveRef + 1);
    expect(calls.readFile).toBe(afterFirst.readFile);

    // A new commit: one lookup, then each agent's file once.
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
    expect(calls.resolveRef).toBe(afterFirst.resolveRef + 2);
    expect(calls.readFile).toBe(afterFirst.readFile + 3);
    expect(states.get("2")?.configuration.observability.logging.level).toBe("error");

    for (const stop of stops) stop();
    await until(() => watches.size === 0, 5_000, "watch forgotten after its agents' streams ended");
    expect(watches.pushed({ id: "7" })).toBe(0);
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

  test("a read that loses the race with a newer poll's is dropped: an agent never steps back a commit", async () => {
    const c1 = await repo.commit({
      ".gitlab/agents/a/config.yaml": "{}\n",
      ".gitlab/agents/b/config.yaml": "{}\n",
    });
    make(3_600_000);
    // b's read of the first commit is held until released; everything else goes through.
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let heldDone!: () => void;
    const heldRead = new Promise<void>((resolve) => {
      heldDone = resolve;
    });
    const inner = counting(new LocalGitRepositories()).reader;
    const reader: RepositoryReader = {
      ...inner,
      readFile: async (location, commit, path, max, ctx) => {
        if (commit !== c1 || !path.includes("/b/")) return inner.readFile(location, commit, path, max, ctx);
        await held;
        const content = await inner.readFile(location, commit, path, max, ctx);
        setImmediate(heldDone); // once the watch has had the result
        return content;
      },
    };
    watches = new ConfigurationWatches({
      repositories: reader,
      pollPeriodMs: 3_600_000,
      maxFileBytes: 1024,
      metrics: createConfigurationMetrics(new Registry()),
      log: createLogger({ level: "silent" }),
      lingerMs: 0,
    });
    follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === c1, 10_000, "a at c1");
    const seenByB: (string | undefined)[] = [];
    watches.subscribe(agent(2, "b", repo), "", (state) => seenByB.push(state.commitId));
    const c2 = await repo.commit({
      ".gitlab/agents/a/config.yaml": "{}\n",
      ".gitlab/agents/b/config.yaml": "gitops: {}\n",
    });
    watches.pushed({ id: "7" });
    await until(() => seenByB.includes(c2), 10_000, "b at c2");
    release();
    await heldRead;
    expect(seenByB.filter((c) => c !== undefined)).toEqual([c2]);
    expect(watches.stateOf("2")?.commitId).toBe(c2);
  });

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
    expect(c.calls).toMatchObject({ resolveRef: 1, readFile: 1 });
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

  test("a file that cannot be read is retried with growing delays, and the other agents' files still are read", async () => {
    const commit = await repo.commit({
      ".gitlab/agents/a/config.yaml": "{}\n",
      ".gitlab/agents/b/config.yaml": "{}\n",
    });
    const inner = counting(new LocalGitRepositories()).reader;
    let reads = 0;
    const reader: RepositoryReader = {
      ...inner,
      readFile: async (location, c, path, max, ctx) => {
        if (path.includes("/a/")) {
          reads++;
          throw new RepositoryError("unavailable", "TreeEntry refused: too many requests");
        }
        return inner.readFile(location, c, path, max, ctx);
      },
    };
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    registry = new Registry();
    watches = new ConfigurationWatches({
      repositories: reader,
      pollPeriodMs: 3_600_000,
      maxFileBytes: 1024,
      metrics: createConfigurationMetrics(registry),
      log: createLogger({ level: "silent" }),
      random: () => 0.5,
      lingerMs: 0,
    });
    follow(agent(1, "a", repo));
    follow(agent(2, "b", repo));
    await until(() => states.get("2")?.commitId === commit && reads >= 1, 10_000, "b read, a failed");
    await until(async () => (await failures()) >= 1, 10_000, "failure counted");
    for (const delay of [1_000, 2_000, 4_000]) {
      const before = reads;
      await vi.advanceTimersByTimeAsync(delay - 50);
      expect(reads).toBe(before);
      await vi.advanceTimersByTimeAsync(100);
      await until(() => reads === before + 1, 10_000, `retry after ${delay} ms`);
      await until(async () => (await failures()) === before + 1, 10_000, "counted");
    }
    expect(states.get("1")?.problem?.kind).toBe("repository");
  });

  test("a project without the agent's file, or without commits, is the empty configuration", async () => {
    make(3_600_000);
    follow(agent(1, "a", repo));
    await until(() => states.get("1")?.commitId === "", 10_000, "empty repository");
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
