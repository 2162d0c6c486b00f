// Agent configuration end to end, in this process: kas reads each agent's config.yaml from its
// (local git) configuration project and streams it over the agent's gRPC channel; agentk applies it.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AgentConfiguration } from "../../../modules/agentcfg/index.ts";
import { createLogger } from "../../../tool/observability/index.ts";
import { gitlabJwt, OTHER_TOKEN, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { until } from "../../support/until.ts";

const PROD = ".gitlab/agents/prod/config.yaml";
const STAGING = ".gitlab/agents/staging/config.yaml";

describe("agent configuration from a local git repository", () => {
  let dir: string;
  let repo: GitRepo;
  let kas: InProcessKas;
  let prod: InProcessAgentk;
  // prod's logger: agentk sets its level from the configuration (lines are discarded).
  const prodLog = createLogger({ level: "info", destination: { write: () => true } });
  let staging: InProcessAgentk;
  const files: Record<string, string> = {};

  const api = async (path: string, init: RequestInit = {}) =>
    fetch(`${kas.addresses.api}${path}`, {
      ...init,
      headers: { "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret), ...init.headers },
    });
  const push = (project: Record<string, unknown>) =>
    api("/api/v1/notifications/git_push", {
      method: "POST",
      body: JSON.stringify({ project }),
      headers: { "content-type": "application/json" },
    });
  const commit = async (changes: Record<string, string | undefined>) => {
    for (const [path, content] of Object.entries(changes)) {
      if (content === undefined) delete files[path];
      else files[path] = content;
    }
    return repo.commit(files);
  };
  /** What GitLab's API shows of agent 42's configuration. */
  const shown42 = async (): Promise<Shown> =>
    (await api("/api/v1/agents/42/configuration")).json() as Promise<Shown>;
  const configOf = (agent: InProcessAgentk): AgentConfiguration | undefined =>
    agent.agent.configuration.current;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-"));
    repo = await GitRepo.init();
    await commit({
      [PROD]: "observability:\n  logging:\n    level: debug\n",
      [STAGING]: "gitops:\n  manifest_projects:\n    - id: group/manifests\n",
    });
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      [
        `${TOKEN}: {agentId: 42, projectId: 7, agentName: prod, repository: ${JSON.stringify(repo.path)}}`,
        `${OTHER_TOKEN}: {agentId: 43, projectId: 7, agentName: staging, repository: ${JSON.stringify(repo.path)}}`,
      ].join("\n"),
    );
    // A poll period far longer than the tests: changes arrive through push notifications.
    kas = await startInProcessKas((config) => {
      config.agent.staticTokensFile = tokensFile;
      config.agent.configuration.pollPeriodMs = 3_600_000;
    });
    prod = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      log: prodLog,
    });
    staging = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: OTHER_TOKEN });
  });
  afterAll(async () => {
    await Promise.all([prod?.stop(), staging?.stop()]);
    await kas?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("each agent gets its own file, validated, with GitLab's defaults; agentk applies its log level", async () => {
    await until(
      () => configOf(prod) !== undefined && configOf(staging) !== undefined,
      10_000,
      "configurations",
    );
    expect(configOf(prod)?.observability.logging.level).toBe("debug");
    expect(configOf(prod)?.gitops).toBeUndefined();
    expect(configOf(staging)?.gitops?.manifest_projects[0]).toMatchObject({
      id: "group/manifests",
      default_namespace: "default",
      prune: true,
    });
    expect(prod.agent.configuration.current).not.toBe(staging.agent.configuration.current);
    expect(prodLog.level).toBe("debug");
  });

  test("a push notification: the change reaches the agent without waiting for the poll period", async () => {
    const commitId = await commit({ [PROD]: "observability:\n  logging:\n    level: warn\n" });
    const res = await push({ id: 7 });
    expect(res.status).toBe(204);
    await until(() => configOf(prod)?.observability.logging.level === "warn", 10_000, "new configuration");
    expect(prodLog.level).toBe("warn");
    const shown = await shown42();
    expect(shown).toMatchObject({
      agent_id: "42",
      commit_id: commitId,
      configuration: { observability: { logging: { level: "warn" } } },
    });
    expect(shown.last_error).toBeUndefined();
  });

  test("an invalid file is refused with its YAML path; the agent keeps its last good configuration", async () => {
    const before = configOf(prod);
    const bad = await commit({ [PROD]: "observability:\n  logging:\n    levle: debug\n" });
    await push({ id: 7 });
    await until(async () => (await shown42()).last_error?.commitId === bad, 10_000, "the refusal shown");
    const shown = await shown42();
    expect(shown.last_error?.kind).toBe("invalid");
    expect(shown.last_error?.message).toContain("observability.logging.levle");
    expect(shown.configuration?.observability.logging.level).toBe("warn"); // the last good one
    expect(configOf(prod)).toBe(before);
    const metrics = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
    expect(metrics).toMatch(/kas_agent_configuration_invalid_total \d+/);
    expect(Number(/kas_agent_configuration_invalid_total (\d+)/.exec(metrics)?.[1])).toBeGreaterThan(0);
  });

  test("an oversized file is refused before it is read; a deleted file is the empty configuration", async () => {
    const big = await commit({ [PROD]: `# ${"x".repeat(200 * 1024)}\n` });
    await push({ id: 7 });
    await until(async () => (await shown42()).last_error?.commitId === big, 10_000, "the refusal");
    const body = await shown42();
    expect(body.last_error?.message).toContain("larger than the 131072 bytes allowed");
    const gone = await commit({ [PROD]: undefined });
    await push({ full_path: "does/not/matter" }); // no agent here has that path: nothing polls
    await push({ id: 7 });
    await until(async () => (await shown42()).commit_id === gone, 10_000, "deleted");
    await until(
      () => configOf(prod)?.observability.logging.level === "info",
      10_000,
      "empty configuration applied",
    );
    expect(configOf(prod)?.gitops).toBeUndefined();
  });

  test("bad notifications are refused with a clear error", async () => {
    expect((await push({})).status).toBe(400);
    expect((await push({ id: -1 })).status).toBe(400);
    const notJson = await api("/api/v1/notifications/git_push", { method: "POST", body: "{" });
    expect(notJson.status).toBe(400);
    expect((await api("/api/v1/notifications/git_push")).status).toBe(405);
    const huge = await api("/api/v1/notifications/git_push", { method: "POST", body: "x".repeat(70_000) });
    expect(huge.status).toBe(413);
    expect((await api("/api/v1/agents/99/configuration")).status).toBe(404);
    const noJwt = await fetch(`${kas.addresses.api}/api/v1/agents/42/configuration`);
    expect(noJwt.status).toBe(401);
  });

  test("an agent that reconnects with the commit it has gets nothing until something newer", async () => {
    const applied = () =>
      Number(/agentk_configuration_updates_total\{result="applied"\} (\d+)/.exec(metricsText)?.[1] ?? 0);
    let metricsText = await prodMetrics();
    const before = applied();
    prod.agent.client.active!.destroy(); // the tunnel drops; the stream is opened again on the next one
    await until(() => prod.agent.client.active !== undefined, 10_000, "reconnect");
    const next = await commit({ [PROD]: "observability:\n  logging:\n    level: error\n" });
    await push({ id: 7 });
    await until(() => configOf(prod)?.observability.logging.level === "error", 10_000, "after reconnect");
    metricsText = await prodMetrics();
    expect(applied()).toBe(before + 1); // only the new commit: nothing re-sent for the one it had
    expect((await shown42()).commit_id).toBe(next);
  });

  async function prodMetrics(): Promise<string> {
    return (await fetch(`${prod.agent.urls.observability}/metrics`)).text();
  }
});

interface Shown {
  agent_id: string;
  commit_id: string | null;
  configuration: AgentConfiguration | null;
  last_error?: { kind: string; message: string; commitId?: string };
}
