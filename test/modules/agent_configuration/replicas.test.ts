// Two kas replicas sharing a real Redis, one agentk connected to replica A: a git push notification
// sent to replica B reaches A through Redis pub/sub (the poll period is an hour, so only the push
// can explain the change), and B's API shows the configuration A read (state shared in Redis).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";
import { metricsOf, metricValue, pushTo, shown, tokenLine } from "./helpers.ts";

const PROD = ".gitlab/agents/prod/config.yaml";
const level = (l: string) => `observability:\n  logging:\n    level: ${l}\n`;

describe("agent configuration across kas replicas (shared Redis)", () => {
  let dir: string;
  let redis: RedisServer;
  let repo: GitRepo;
  let a: InProcessKas;
  let b: InProcessKas;
  let agent: InProcessAgentk;
  const levelOf = () => agent.agent.configuration.current?.observability.logging.level;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-replicas-"));
    redis = await RedisServer.start();
    repo = await GitRepo.init();
    await repo.commit({ [PROD]: level("debug") });
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", repository: repo.path })}\n`,
    );
    const adjust = (config: InProcessKas["config"]) => {
      config.agent.staticTokensFile = tokensFile;
      config.agent.configuration.pollPeriodMs = 3_600_000; // only a push explains a change
    };
    const cluster = { redis: { host: redis.host, port: redis.port } };
    a = await startInProcessKas(adjust, cluster);
    b = await startInProcessKas(adjust, cluster);
    agent = await startInProcessAgentk({ kasUrl: a.addresses.agent, token: TOKEN });
  });
  afterAll(async () => {
    await agent?.stop();
    await Promise.all([a?.close(), b?.close()]);
    await redis?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("the agent, connected to A, gets its configuration; B polls nothing of it", async () => {
    await until(() => levelOf() === "debug", 10_000, "the first configuration");
    expect(metricValue(await metricsOf(b.addresses.observability), "kas_agent_configuration_projects")).toBe(
      0,
    );
    expect(metricValue(await metricsOf(a.addresses.observability), "kas_agent_configuration_projects")).toBe(
      1,
    );
  });

  test("a push notification sent to B reaches the agent on A", async () => {
    const polls = async () =>
      metricValue(await metricsOf(a.addresses.observability), "kas_agent_configuration_polls_total");
    const before = await polls();
    const commitId = await repo.commit({ [PROD]: level("warn") });
    expect(await pushTo(b, { id: 7 })).toBe(204);
    await until(() => levelOf() === "warn", 10_000, "the pushed configuration on the agent");
    expect(await polls()).toBe(before + 1); // one poll, the push's
    const textA = await metricsOf(a.addresses.observability);
    const textB = await metricsOf(b.addresses.observability);
    // Each replica heard the push; only A, which has the agent, polled for it.
    expect(metricValue(textA, "kas_git_push_notifications_total", { result: "polled" })).toBe(1);
    expect(metricValue(textB, "kas_git_push_notifications_total", { result: "unknown" })).toBe(1);
    expect(metricValue(textB, "kas_agent_configuration_polls_total")).toBe(0);

    // B's API shows what A read: the state is in Redis.
    await until(async () => (await shown(b, 42)).body.commit_id === commitId, 10_000, "B shows A's read");
    const onB = await shown(b, 42);
    expect(onB.status).toBe(200);
    expect(onB.body).toMatchObject({
      agent_id: "42",
      commit_id: commitId,
      configuration: { observability: { logging: { level: "warn" } } },
    });
    expect(onB.body.last_error).toBeUndefined();
    expect((await shown(a, 42)).body).toEqual(onB.body);
  });

  test("a push for a project no agent uses changes nothing on either replica", async () => {
    const current = agent.agent.configuration.current;
    expect(await pushTo(b, { id: 999 })).toBe(204);
    await until(
      async () =>
        metricValue(await metricsOf(a.addresses.observability), "kas_git_push_notifications_total", {
          result: "unknown",
        }) === 1,
      10_000,
      "A heard the push",
    );
    expect(agent.agent.configuration.current).toBe(current);
    expect((await shown(b, 43)).status).toBe(404);
  });
});
