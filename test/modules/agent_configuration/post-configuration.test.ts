// kas posts each agent's configuration to GitLab (agent_configuration), as GitLab's kas does: when
// it first reads the file and at every new commit, never on an unchanged poll; a failing GitLab is
// retried (by the client, then at the next poll) while the agent already has its configuration.
// The agent is a static token reading a local git repository; gitlab.address gives kas its GitLab
// client (the GitLab API test server, which knows agent 42). The poll period is an hour: only
// push notifications poll.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createLogger } from "../../../cmd/kas/observability/index.ts";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";
import { until } from "../../support/until.ts";
import { metricsOf, metricValue, pushTo, tokenLine } from "./helpers.ts";

const PROD = ".gitlab/agents/prod/config.yaml";
const file = (level: string, project: string) =>
  [
    "observability:",
    "  logging:",
    `    level: ${level}`,
    "ci_access:",
    "  projects:",
    `    - id: ${project}`,
    "user_access:",
    "  access_as:",
    "    agent: {}",
    "gitops:",
    "  manifest_projects:",
    "    - id: group/manifests",
    "      reconcile_timeout: 90s",
    "",
  ].join("\n");

describe("kas posts agent configurations to GitLab", () => {
  let dir: string;
  let repo: GitRepo;
  let gitlab: GitLabApiServer;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  const lines: string[] = [];
  const levelOf = () => agent.agent.configuration.current?.observability.logging.level;
  const posted = () => gitlab.postedConfigurations;
  const postsMetric = async (result: string) =>
    metricValue(await metricsOf(kas.addresses.observability), "kas_agent_configuration_posts_total", {
      result,
    });
  const polls = async () =>
    metricValue(await metricsOf(kas.addresses.observability), "kas_agent_configuration_polls_total");
  /** A push, and its poll over. */
  const pushAndPoll = async () => {
    const before = await polls();
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(async () => (await polls()) > before, 10_000, "the push's poll");
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-post-"));
    repo = await GitRepo.init();
    await repo.commit({ [PROD]: file("debug", "group/app") });
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
    const log = createLogger({ level: "info", destination: { write: (l: string) => void lines.push(l) } });
    kas = await startInProcessKas(
      (config) => {
        config.agent.staticTokensFile = tokensFile;
        config.gitlab.address = gitlab.url;
        config.gitlab.authenticationSecretFile = secretFile;
        config.agent.configuration.pollPeriodMs = 3_600_000;
      },
      { log },
    );
    agent = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN });
  });
  afterAll(async () => {
    await agent?.stop();
    await kas?.close();
    await gitlab?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("the first read posts the parsed configuration once, as protojson", async () => {
    await until(() => posted().length === 1, 10_000, "the first post");
    expect(levelOf()).toBe("debug");
    const [first] = posted();
    expect(first!.agentId).toBe(42);
    expect(first!.agentConfig).toMatchObject({
      ci_access: { projects: [{ id: "group/app" }] },
      user_access: { access_as: { agent: {} } },
      observability: { logging: { level: "debug" } },
      // google.protobuf.Duration in protojson, not milliseconds.
      gitops: {
        manifest_projects: [{ id: "group/manifests", reconcile_timeout: "90s", prune_timeout: "3600s" }],
      },
    });
    const request = gitlab.configurationPosts[0]!;
    expect(request.body).toMatchObject({ agent_id: "42" });
    expect(request.jwt.ok).toBe(true);
    expect(request.userAgent).toMatch(/^gitlab-kas\/[^/]+\/[^/]+$/);
    expect(await postsMetric("posted")).toBe(1);
  });

  test("an unchanged poll posts nothing", async () => {
    await pushAndPoll();
    await pushAndPoll();
    expect(gitlab.configurationPosts.length).toBe(1);
  });

  test("a new commit posts again", async () => {
    await repo.commit({ [PROD]: file("warn", "group/other") });
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(() => posted().length === 2, 10_000, "the new commit's post");
    expect(posted()[1]!.agentConfig).toMatchObject({
      ci_access: { projects: [{ id: "group/other" }] },
      observability: { logging: { level: "warn" } },
    });
    await until(() => levelOf() === "warn", 10_000, "the new configuration on the agent");
  });

  test("GitLab answering 500 then 204: retried, posted; the agent has its configuration", async () => {
    const before = gitlab.configurationPosts.length;
    gitlab.failNextConfigurationPosts(500);
    await repo.commit({ [PROD]: file("info", "group/third") });
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(() => posted().length === 3, 10_000, "the retried post");
    expect(gitlab.configurationPosts.slice(before).map((r) => r.status)).toEqual([500, 204]);
    await until(() => levelOf() === "info", 10_000, "the configuration on the agent");
  });

  test("GitLab failing every attempt: the agent gets its configuration, the failure is counted and logged, the next poll posts", async () => {
    // More failures than the client's attempts (4): this post gives up.
    gitlab.failNextConfigurationPosts(500, 500, 500, 500);
    await repo.commit({ [PROD]: file("error", "group/fourth") });
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(() => levelOf() === "error", 10_000, "the configuration on the agent while GitLab fails");
    await until(async () => (await postsMetric("failed")) === 1, 15_000, "the failed post counted");
    expect(posted().length).toBe(3);
    expect(lines.join("")).toContain("cannot post agent configuration to GitLab");
    // The same commit, polled again: posted now.
    await pushAndPoll();
    await until(() => posted().length === 4, 10_000, "the post at the next poll");
    expect(posted()[3]!.agentConfig).toMatchObject({ ci_access: { projects: [{ id: "group/fourth" }] } });
  });

  test("a refused file posts nothing (the agent keeps its configuration, GitLab its copy)", async () => {
    const before = gitlab.configurationPosts.length;
    expect(before).toBeGreaterThan(0); // the good commits were posted
    await repo.commit({ [PROD]: "ci_access:\n  projects: 7\n" });
    await pushAndPoll();
    expect(gitlab.configurationPosts.length).toBe(before);
    expect(levelOf()).toBe("error");
  });
});

describe("without gitlab.address (static tokens only)", () => {
  let repo: GitRepo;
  let dir: string;
  let kas: InProcessKas;
  let agent: InProcessAgentk;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-nopost-"));
    repo = await GitRepo.init();
    await repo.commit({ [PROD]: file("debug", "group/app") });
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", repository: repo.path })}\n`,
    );
    kas = await startInProcessKas((config) => {
      config.agent.staticTokensFile = tokensFile;
      config.agent.configuration.pollPeriodMs = 3_600_000;
    });
    agent = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN });
  });
  afterAll(async () => {
    await agent?.stop();
    await kas?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("the agent gets its configuration; nothing is posted (the posts metric stays at zero)", async () => {
    await until(() => agent.agent.configuration.current?.observability.logging.level === "debug", 10_000);
    const text = await metricsOf(kas.addresses.observability);
    expect(text).toContain("kas_agent_configuration_posts_total");
    expect(metricValue(text, "kas_agent_configuration_posts_total")).toBe(0);
  });
});
