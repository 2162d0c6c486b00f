// A project's agent configuration files read together through the real Gitaly client and the Gitaly
// test server: agents of one project arriving one after another at the same commit cost one ref
// lookup, one listing (GetTreeEntries) and one blob batch (GetBlobs) in all, never a TreeEntry per
// agent; an oversized file (GetBlobs' own size report) refuses only its agent, at the cost of one
// more batch; a moved commit reads once more.
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { GitalyRepositories } from "../../../cmd/kas/repositories/gitaly/index.ts";
import { createConfigurationMetrics } from "../../../modules/agent_configuration/kas/metrics.ts";
import type { AgentConfigurationState } from "../../../modules/agent_configuration/kas/state.ts";
import { ConfigurationWatches } from "../../../modules/agent_configuration/kas/watches.ts";
import type { AgentInfo } from "../../../modules/runtime/index.ts";
import { createLogger } from "../../../tool/observability/index.ts";
import { type TestRepo, TestStorage } from "../../support/git-repo.ts";
import { GitalyTestServer } from "../../support/gitaly-server.ts";
import { until } from "../../support/until.ts";

const TOKEN = "gitaly-batch-secret";
const N = 12;
const manifest = (i: number, v: number) => `group/manifests-${i}-v${v}`;
const fileOf = (i: number) => `.gitlab/agents/agent-${i}/config.yaml`;

describe("agent configuration files read together from Gitaly", () => {
  let storage: TestStorage;
  let repo: TestRepo;
  let gitaly: GitalyTestServer;
  let reader: GitalyRepositories;
  let watches: ConfigurationWatches;
  let commit: string;
  const states = new Map<string, AgentConfigurationState>();
  const calls = () => ({
    refs: gitaly.calls("InfoRefsUploadPack"),
    listings: gitaly.calls("GetTreeEntries"),
    batches: gitaly.calls("GetBlobs"),
    files: gitaly.calls("TreeEntry"),
  });
  const agent = (i: number): AgentInfo => ({
    agentId: String(i),
    projectId: "7",
    agentName: `agent-${i}`,
    gitalyInfo: { address: gitaly.address, token: TOKEN, features: {} },
    gitalyRepository: {
      storageName: "default",
      relativePath: "group/project-7.git",
      glRepository: "project-7",
      glProjectPath: "group/project-7",
    },
  });
  const follow = (i: number) => watches.subscribe(agent(i), "", (s) => states.set(s.agentId, s));
  const files = (v: number) => {
    const out: Record<string, string> = {};
    for (let i = 0; i < N; i++) out[fileOf(i)] = `gitops: {manifest_projects: [{id: ${manifest(i, v)}}]}\n`;
    return out;
  };

  beforeAll(async () => {
    storage = await TestStorage.create();
    repo = await storage.init("group/project-7.git");
    // Agent 1's file is over the 1024 bytes allowed; agent 2's is not YAML.
    commit = await repo.commit({
      ...files(1),
      [fileOf(1)]: `# ${"x".repeat(2000)}\n{}\n`,
      [fileOf(2)]: "gitops: [unclosed\n",
    });
    gitaly = await GitalyTestServer.start({ storages: { default: storage.root }, token: TOKEN });
    reader = new GitalyRepositories();
    watches = new ConfigurationWatches({
      repositories: reader,
      pollPeriodMs: 3_600_000,
      maxFileBytes: 1024,
      metrics: createConfigurationMetrics(new Registry()),
      log: createLogger({ level: "silent" }),
      lingerMs: 0,
    });
  });
  afterAll(async () => {
    watches?.close();
    await reader?.close();
    await gitaly?.close();
    await storage?.remove();
  });

  test("agents arriving one after another: the first alone reads its own file, the others share one listing and two batches (one oversized file left out)", async () => {
    for (let i = 0; i < N; i++) {
      follow(i);
      await until(() => states.get(String(i))?.checkedAt !== undefined, 10_000, `agent ${i}`);
    }
    for (let i = 0; i < N; i++) {
      const state = states.get(String(i))!;
      if (i === 1) {
        expect(state.problem).toMatchObject({
          kind: "invalid",
          commitId: commit,
          message: `${fileOf(1)} is larger than the 1024 bytes allowed`,
        });
      } else if (i === 2) {
        expect(state.problem).toMatchObject({ kind: "invalid", commitId: commit });
        expect(state.problem?.message).toContain(fileOf(2));
      } else {
        expect(state).toMatchObject({ commitId: commit });
        expect(state.problem).toBeUndefined();
        expect(state.configuration.gitops?.manifest_projects[0]?.id).toBe(manifest(i, 1));
      }
    }
    expect(calls()).toEqual({ refs: 1, listings: 1, batches: 2, files: 1 });
  });

  test("a moved commit: one ref lookup, one listing, one batch for every agent", async () => {
    const before = calls();
    const moved = await repo.commit(files(2));
    expect(watches.pushed({ id: "7" })).toBe(1);
    await until(
      () => [...Array(N).keys()].every((i) => states.get(String(i))?.commitId === moved),
      10_000,
      "every agent at the moved commit",
    );
    for (let i = 0; i < N; i++) {
      expect(states.get(String(i))?.configuration.gitops?.manifest_projects[0]?.id).toBe(manifest(i, 2));
      expect(states.get(String(i))?.problem).toBeUndefined();
    }
    expect(calls()).toEqual({
      refs: before.refs + 1,
      listings: before.listings + 1,
      batches: before.batches + 1,
      files: before.files,
    });
  });
});
