// Two kas replicas sharing a real Redis, agent 42's two agentk replicas connected one to each: both
// kas replicas read each commit of its file, and GitLab gets one agent_configuration post per
// commit between them (claimed in Redis); the other replica counts it as posted elsewhere.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";
import { metricsOf, metricValue, pushTo, tokenLine } from "./helpers.ts";

const PROD = ".gitlab/agents/prod/config.yaml";
const level = (l: string) => `observability:\n  logging:\n    level: ${l}\n`;

describe("agent configuration posts across kas replicas (shared Redis)", () => {
  let dir: string;
  let redis: RedisServer;
  let repo: GitRepo;
  let gitlab: GitLabApiServer;
  let a: InProcessKas;
  let b: InProcessKas;
  let onA: InProcessAgentk;
  let onB: InProcessAgentk;
  const levelOf = (agent: InProcessAgentk) => agent.agent.configuration.current?.observability.logging.level;
  /** posted + elsewhere on both replicas: every replica that read a commit has decided. */
  const decided = async () => {
    let sum = 0;
    for (const kas of [a, b]) {
      const text = await metricsOf(kas.addresses.observability);
      sum += metricValue(text, "kas_agent_configuration_posts_total", { result: "posted" });
      sum += metricValue(text, "kas_agent_configuration_posts_total", { result: "elsewhere" });
    }
    return sum;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-post-replicas-"));
    redis = await RedisServer.start();
    repo = await GitRepo.init();
    await repo.commit({ [PROD]: level("debug") });
    const secret = new Uint8Array(randomBytes(32));
    gitlab = await GitLabApiServer.start({
      secret,
      agents: { "glagent-known-to-gitlab": { agentId: 42, projectId: 7, agentName: "prod" } },
    });
    const secretFile = join(dir, "gitlab_secret");
    await writeFile(secretFile, Buffer.from(secret).toString("base64"));
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", repository: repo.path })}\n`,
    );
    const adjust = (config: InProcessKas["config"]) => {
      config.agent.staticTokensFile = tokensFile;
      config.gitlab.address = gitlab.url;
      config.gitlab.authenticationSecretFile = secretFile;
      config.agent.configuration.pollPeriodMs = 3_600_000; // only pushes poll
    };
    const cluster = { redis: { host: redis.host, port: redis.port } };
    a = await startInProcessKas(adjust, cluster);
    b = await startInProcessKas(adjust, cluster);
    onA = await startInProcessAgentk({ kasUrl: a.addresses.agent, token: TOKEN });
    onB = await startInProcessAgentk({ kasUrl: b.addresses.agent, token: TOKEN });
  });
  afterAll(async () => {
    await Promise.all([onA?.stop(), onB?.stop()]);
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all([redis?.close(), gitlab?.close()]);
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("the first commit, read by both replicas, is posted once", async () => {
    await until(() => levelOf(onA) === "debug" && levelOf(onB) === "debug", 10_000, "both agents configured");
    await until(async () => (await decided()) === 2, 10_000, "both replicas decided");
    expect(gitlab.configurationPosts.length).toBe(1);
    expect(gitlab.postedConfigurations).toMatchObject([{ agentId: 42 }]);
  });

  test("a new commit, pushed to both, is posted once more", async () => {
    await repo.commit({ [PROD]: level("warn") });
    // GitLab's push reaches every replica through Redis; both poll.
    expect(await pushTo(a, { id: 7 })).toBe(204);
    await until(() => levelOf(onA) === "warn" && levelOf(onB) === "warn", 10_000, "both agents reconfigured");
    await until(async () => (await decided()) === 4, 10_000, "both replicas decided");
    expect(gitlab.configurationPosts.length).toBe(2);
    expect(gitlab.postedConfigurations[1]!.agentConfig).toMatchObject({
      observability: { logging: { level: "warn" } },
    });
  });
});
