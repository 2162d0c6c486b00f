// ConfigurationWatches against real git repositories: one ref lookup per poll per project however
// many agents it configures, a file read only when the commit moved, first polls spread over the
// period for agents that already have a configuration, and problems that keep the last good one.
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { createLogger } from "../../../cmd/common/observability/index.ts";
import { LocalGitRepositories } from "../../../cmd/kas/repositories/local-git.ts";
import { createConfigurationMetrics } from "../../../modules/agent_configuration/kas/metrics.ts";
import type { AgentConfigurationState } from "../../../modules/agent_configuration/kas/state.ts";
import { ConfigurationWatches } from "../../../modules/agent_configuration/kas/watches.ts";
import type { AgentInfo, RepositoryReader } from "../../../modules/runtime/index.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { until } from "../../support/until.ts";

/** The real local-git reader, counting calls by method. */
function counting(inner: RepositoryReader) {
  const calls = { resolveRef: 0, readFile: 0, listFiles: 0 };
  const reader: RepositoryReader = {
    resolveRef: (...a) => {
      calls.resolveRef++;
      return inner.resolveRef(...a);
    },
    readFile: (...a) => {
      calls.readFile++;
      return inner.readFile(...a);
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
    expect(watches.size).toBe(0);
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
