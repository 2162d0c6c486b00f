// Many agents on one kas with tiny limits toward Gitaly: every agent still gets its configuration
// (calls over a limit wait their turn, none is dropped), the deferrals are counted, and agents that
// share a configuration project share its poll: one ref lookup (InfoRefsUploadPack) per poll per
// project, whatever the number of agents; each agent's own file is one read (TreeEntry).
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
      // 5 calls a second toward Gitaly, 3 at once: the 27 agents' reads must queue unless they
      // arrive over 5 s or more, which even a loaded machine does not take to connect them (with
      // {10/s, 10} a slow start let every read through). In process the bucket is exact.
      config.gitaly.globalApiRateLimit = { refillRatePerSecond: 5, bucketSize: 3 };
      config.gitaly.perServerApiRateLimit = { refillRatePerSecond: 5, bucketSize: 3 };
    });
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a?.stop()));
    await kas?.close();
    await Promise.all([gitaly?.close(), gitlab?.close()]);
    await storage?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("the first agent of each project: one poll per project", async () => {
    await Promise.all(PROJECTS.map((_, i) => start(i))); // agents 0, 1, 2: one per project
    await until(() => [0, 1, 2].every((i) => hasVersion(i, 1)), 10_000, "the first agents' configurations");
    expect(gitaly.calls("InfoRefsUploadPack")).toBe(3);
    expect(gitaly.calls("TreeEntry")).toBe(3);
    expect(await polls()).toBe(3);
  });

  test("27 more agents at once: each gets its own file, deferred by the limits, never dropped; no new poll", async () => {
    await Promise.all(Array.from({ length: AGENTS - 3 }, (_, k) => start(k + 3)));
    await until(
      () => agents.every((_, i) => hasVersion(i, 1)) && agents.length === AGENTS,
      15_000,
      "every agent's configuration",
    );
    for (let i = 0; i < AGENTS; i++) expect(manifestOf(i)).toBe(`group/manifests-${i}-v1`);
    // The projects' commits were known: each new agent cost one read of its file, no ref lookup.
    expect(gitaly.calls("InfoRefsUploadPack")).toBe(3);
    expect(gitaly.calls("TreeEntry")).toBe(AGENTS);
    expect(await polls()).toBe(3);
    const text = await kasMetrics();
    expect(metricValue(text, "kas_gitaly_rate_limited_total")).toBeGreaterThan(0);
    expect(metricValue(text, "kas_agent_configuration_projects")).toBe(PROJECTS.length);
  });

  test("a push to each project: one ref lookup per project, not per agent; every agent gets its change", async () => {
    const refsBefore = gitaly.calls("InfoRefsUploadPack");
    const readsBefore = gitaly.calls("TreeEntry");
    const pollsBefore = await polls();
    const limitedBefore = metricValue(await kasMetrics(), "kas_gitaly_rate_limited_total");
    await commitAll(2);
    for (const project of PROJECTS) expect(await pushTo(kas, { id: project })).toBe(204);
    await until(() => agents.every((_, i) => hasVersion(i, 2)), 15_000, "every agent's change");
    await until(async () => (await polls()) === pollsBefore + 3, 5_000, "the three polls counted");
    expect(gitaly.calls("InfoRefsUploadPack") - refsBefore).toBe(PROJECTS.length);
    expect(gitaly.calls("TreeEntry") - readsBefore).toBe(AGENTS);
    expect(metricValue(await kasMetrics(), "kas_gitaly_rate_limited_total")).toBeGreaterThan(limitedBefore);
    expect(
      metricValue(await kasMetrics(), "kas_agent_configuration_polls_total", { result: "changed" }),
    ).toBe(6);
  });
});
