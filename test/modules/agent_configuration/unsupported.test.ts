// Sections of config.yaml that GitLab's agent acts on and this one does not (container_scanning,
// remote_development, observability.google_profiler) are kept, not ignored in silence: GitLab's
// API shows them as `unsupported`, kas logs them and counts them, once per agent and commit. The
// agent is a static token reading a local git repository; only push notifications poll.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createLogger } from "../../../cmd/kas/observability/index.ts";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { until } from "../../support/until.ts";
import { kasApi, metricsOf, metricValue, pushTo, tokenLine } from "./helpers.ts";

const PROD = ".gitlab/agents/prod/config.yaml";
const BOTH = [
  "container_scanning:",
  "  cadence: '0 0 * * *'",
  "remote_development:",
  "  enabled: true",
  "  dns_zone: workspaces.example.dev",
  "observability:",
  "  logging: {level: debug}",
  "",
].join("\n");

interface Answer {
  commit_id: string | null;
  configuration: Record<string, unknown> | null;
  unsupported: string[];
}

describe("sections this agent does not act on", () => {
  let dir: string;
  let repo: GitRepo;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  const lines: string[] = [];
  const reports = () => lines.filter((l) => l.includes("sections this agent does not act on"));
  const counted = async (section: string) =>
    metricValue(
      await metricsOf(kas.addresses.observability),
      "kas_agent_configuration_unsupported_sections_total",
      { section },
    );
  const shown = async () => (await (await kasApi(kas, "/api/v1/agents/42/configuration")).json()) as Answer;
  const polls = async () =>
    metricValue(await metricsOf(kas.addresses.observability), "kas_agent_configuration_polls_total");
  const pushAndPoll = async () => {
    const before = await polls();
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(async () => (await polls()) > before, 10_000, "the push's poll");
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-unsupported-"));
    repo = await GitRepo.init();
    await repo.commit({ [PROD]: BOTH });
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", repository: repo.path })}\n`,
    );
    const log = createLogger({ level: "info", destination: { write: (l: string) => void lines.push(l) } });
    kas = await startInProcessKas(
      (config) => {
        config.agent.staticTokensFile = tokensFile;
        config.agent.configuration.pollPeriodMs = 3_600_000;
      },
      { log },
    );
    agent = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN });
  });
  afterAll(async () => {
    await agent?.stop();
    await kas?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("kept and passed on, shown as unsupported, logged and counted", async () => {
    // Until then: 404 (no stream yet), or no commit read yet.
    await until(async () => Boolean((await shown()).commit_id), 10_000, "the first read");
    const answer = await shown();
    expect(answer.unsupported).toEqual(["container_scanning", "remote_development"]);
    expect(answer.configuration).toMatchObject({
      container_scanning: { cadence: "0 0 * * *" },
      remote_development: { enabled: true, dns_zone: "workspaces.example.dev" },
    });
    // The agent has them too (and acts on what it knows: the log level).
    await until(() => agent.agent.configuration.current?.observability.logging.level === "debug", 10_000);
    expect(agent.agent.configuration.current?.remote_development).toMatchObject({ enabled: true });
    expect(await counted("container_scanning")).toBe(1);
    expect(await counted("remote_development")).toBe(1);
    expect(reports()).toHaveLength(1);
    expect(JSON.parse(reports()[0]!)).toMatchObject({
      agentId: "42",
      commitId: answer.commit_id,
      sections: ["container_scanning", "remote_development"],
    });
  });

  test("polls of the same commit report nothing more", async () => {
    await pushAndPoll();
    await pushAndPoll();
    expect(reports()).toHaveLength(1);
    expect(await counted("container_scanning")).toBe(1);
    expect(await counted("remote_development")).toBe(1);
  });

  test("a new commit is reported once, with the sections it sets", async () => {
    const commit = await repo.commit({
      [PROD]: "remote_development: {enabled: false}\nobservability: {google_profiler: {enabled: true}}\n",
    });
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(async () => (await shown()).commit_id === commit, 10_000, "the new commit");
    expect((await shown()).unsupported).toEqual(["remote_development", "observability.google_profiler"]);
    await pushAndPoll();
    expect(reports()).toHaveLength(2);
    expect(JSON.parse(reports()[1]!)).toMatchObject({ commitId: commit });
    expect(await counted("container_scanning")).toBe(1);
    expect(await counted("remote_development")).toBe(2);
    expect(await counted("observability.google_profiler")).toBe(1);
  });

  test("without them: an empty list, nothing logged", async () => {
    const commit = await repo.commit({ [PROD]: "observability: {logging: {level: warn}}\n" });
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(async () => (await shown()).commit_id === commit, 10_000, "the new commit");
    expect((await shown()).unsupported).toEqual([]);
    expect(reports()).toHaveLength(2);
  });
});
