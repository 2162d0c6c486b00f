// Many agents on one kas with tiny limits toward Gitaly: every agent still gets its configuration
// (calls over a limit wait their turn, none is dropped), the deferrals are counted, and agents that
// share a configuration project share its poll and its reads: per project and commit, one ref
// lookup (InfoRefsUploadPack), one listing of .gitlab/agents (GetTreeEntries) and one batch of the
// agents' files (GetBlobs), whatever the number of agents; no agent reads its file on its own
// (TreeEntry).
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { type TestRepo, TestStorage } from "../../support/git-repo.ts";
import { GitalyTestServer } from "../../support/gitaly-server.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";
import { until } from "../../support/until.ts";
import { metricsOf, metricValue, pushTo } from "./helpers.ts";

const PROJECTS = [7, 8, 9];
const AGENTS = 30; // 10 per project
const projectOf = (i: number) => PROJECTS[i % PROJECTS.length]!;
const tokenOf = (i: number) => `glagent-rate-limits-agent-${String(i).padStart(2, "0")}-x7Kq`;
const fileOf = (i: number) => `.gitlab/agents/agent-${i}/config.yaml`;
/** Each agent's own file: a manifest project named after it, at a version. */
const contentOf = (i: number, version: number) =>
  `gitops:\n  manifest_projects:\n    - id: group/manifests-${i}-v${version}\n`;

describe("many agents, tiny Gitaly rate limits, shared polls", () => {
  let dir: string;
  let storage: TestStorage;
  const repos = new Map<number, TestRepo>();
  let gitaly: GitalyTestServer;
  let gitlab: GitLabApiServer;
  let kas: InProcessKas;
  const agents: InProcessAgentk[] = [];
  const manifestOf = (i: number) => agents[i]?.agent.configuration.current?.gitops?.manifest_projects[0]?.id;
  const hasVersion = (i: number, version: number) => manifestOf(i) === `group/manifests-${i}-v${version}`;
  const kasMetrics = () => metricsOf(kas.addresses.observability);
  const polls = async () => metricValue(await kasMetrics(), "kas_agent_configuration_polls_total");
  /** Commits every agent's file at `version` to its project. */
  const commitAll = async (version: number) => {
    for (const project of PROJECTS) {
      const files: Record<string, string> = {};
      for (let i = 0; i < AGENTS; i++) if (projectOf(i) === project) files[fileOf(i)] = contentOf(i, version);
      await repos.get(project)!.commit(files);
    }
  };
  const start = (i: number) =>
    startInProcessAgentk({ kasUrl: kas.addresses.agent, token: tokenOf(i) }).then((a) => {
      agents[i] = a;
    });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-rate-"));
    storage = await TestStorage.create();
    for (const project of PROJECTS) repos.set(project, await storage.init(`group/project-${project}.git`));
    await commitAll(1);
    gitaly = await GitalyTestServer.start({ storages: { default: storage.root } });
    const secret = new Uint8Array(randomBytes(32));
    gitlab = await GitLabApiServer.start({ secret });
    for (let i = 0; i < AGENTS; i++) {
      gitlab.addAgent(tokenOf(i), {
        agentId: 100 + i,
        projectId: projectOf(i),
        agentName: `agent-${i}`,
        gitalyAddress: gitaly.address,
      });
    }
    const secretFile = join(dir, "gitlab_secret");
    await writeFile(secretFile, Buffer.from(secret).toString("base64"));
    kas = await startInProcessKas((config) => {
      config.agent.staticTokensFile = undefined;
      config.gitlab.address = gitlab.url;
      config.gitlab.authenticationSecretFile = secretFile;
      config.agent.configuration.pollPeriodMs = 3_600_000; // polls: the first ones and pushes only
      // 3 calls a second toward Gitaly, one at once: a poll's calls (the ref, then the agent's
      // file, or a listing and a batch) follow each other at once, so they queue unless each
      // Gitaly call takes over 1/3 s. In process the bucket is exact.
      config.gitaly.globalApiRateLimit = { refillRatePerSecond: 3, bucketSize: 1 };
      config.gitaly.perServerApiRateLimit = { refillRatePerSecond: 3, bucketSize: 1 };
    });
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a?.stop()));
    await kas?.close();
    await Promise.all([gitaly?.close(), gitlab?.close()]);
    await storage?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  /** Gitaly's calls by method. */
  const calls = () => ({
    refs: gitaly.calls("InfoRefsUploadPack"),
    listings: gitaly.calls("GetTreeEntries"),
    batches: gitaly.calls("GetBlobs"),
    files: gitaly.calls("TreeEntry"),
  });

  test("the first agent of each project: one poll and one read of its own file per project, deferred by the limits", async () => {
    await Promise.all(PROJECTS.map((_, i) => start(i))); // agents 0, 1, 2: one per project
    await until(() => [0, 1, 2].every((i) => hasVersion(i, 1)), 15_000, "the first agents' configurations");
    // Each project's only agent here: its own file, one call (not a listing and a batch).
    expect(calls()).toEqual({ refs: 3, listings: 0, batches: 0, files: 3 });
    expect(await polls()).toBe(3);
    expect(metricValue(await kasMetrics(), "kas_gitaly_rate_limited_total")).toBeGreaterThan(0);
  });

  test("27 more agents at once: each gets its own file from one listing and one batch per project, shared by its agents; no new poll", async () => {
    await Promise.all(Array.from({ length: AGENTS - 3 }, (_, k) => start(k + 3)));
    await until(
      () => agents.every((_, i) => hasVersion(i, 1)) && agents.length === AGENTS,
      15_000,
      "every agent's configuration",
    );
    for (let i = 0; i < AGENTS; i++) expect(manifestOf(i)).toBe(`group/manifests-${i}-v1`);
    // The projects' commits were known: their files read together once each, whatever the agents.
    expect(calls()).toEqual({ refs: 3, listings: 3, batches: 3, files: 3 });
    expect(await polls()).toBe(3);
    expect(metricValue(await kasMetrics(), "kas_agent_configuration_projects")).toBe(PROJECTS.length);
  });

  test("a push to each project: one ref lookup, listing and batch per project, not per agent; every agent gets its change", async () => {
    const before = calls();
    const pollsBefore = await polls();
    const limitedBefore = metricValue(await kasMetrics(), "kas_gitaly_rate_limited_total");
    await commitAll(2);
    for (const project of PROJECTS) expect(await pushTo(kas, { id: project })).toBe(204);
    await until(() => agents.every((_, i) => hasVersion(i, 2)), 15_000, "every agent's change");
    await until(async () => (await polls()) === pollsBefore + 3, 5_000, "the three polls counted");
    const n = PROJECTS.length;
    expect(calls()).toEqual({
      refs: before.refs + n,
      listings: before.listings + n,
      batches: before.batches + n,
      files: before.files,
    });
    expect(metricValue(await kasMetrics(), "kas_gitaly_rate_limited_total")).toBeGreaterThan(limitedBefore);
    expect(
      metricValue(await kasMetrics(), "kas_agent_configuration_polls_total", { result: "changed" }),
    ).toBe(6);
  });
});
