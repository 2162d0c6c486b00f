// Agent configuration from Gitaly, as GitLab runs it: kas authenticates the agent against GitLab's
// API (test server), whose agent_info names the Gitaly server (address, token) and the project's
// repository; the file lives in a real git repository behind a Gitaly test server. When Gitaly is
// unreachable the agent keeps its configuration, kas stays ready (with a detail), counts the error
// and shows it on the API; when Gitaly is back a push gets the next change through. The Gitaly
// token never reaches kas's logs.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createLogger } from "../../../cmd/kas/observability/index.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { type TestRepo, TestStorage } from "../../support/git-repo.ts";
import { GitalyTestServer } from "../../support/gitaly-server.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";
import { until } from "../../support/until.ts";
import { metricsOf, metricValue, pushTo, shown } from "./helpers.ts";

const AGENT_TOKEN = "glagent-cfg-gitaly-Qx7vK2mN9pL4sT8w";
const GITALY_TOKEN = "gitaly-shared-secret-do-not-log-3f9a1c";
const PROD = ".gitlab/agents/prod/config.yaml";
const level = (l: string) => `observability:\n  logging:\n    level: ${l}\n`;

describe("agent configuration from Gitaly (agent authenticated by GitLab)", () => {
  let dir: string;
  let socket: string;
  let storage: TestStorage;
  let repo: TestRepo;
  let gitaly: GitalyTestServer;
  let gitlab: GitLabApiServer;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  const lines: string[] = [];
  const log = createLogger({
    level: "trace",
    destination: { write: (line: string) => void lines.push(line) },
  });
  const levelOf = () => agent.agent.configuration.current?.observability.logging.level;
  const kasMetrics = () => metricsOf(kas.addresses.observability);
  const startGitaly = () =>
    GitalyTestServer.start({
      storages: { default: storage.root },
      token: GITALY_TOKEN,
      listen: { unix: socket },
    });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-gitaly-"));
    // A unix socket: a Gitaly started again after a stop is at the same address, which kas has
    // from agent_info (cached).
    socket = join(dir, "gitaly.sock");
    storage = await TestStorage.create();
    // agent_info's gitaly_repository for project 7: storage "default", group/project-7.git.
    repo = await storage.init("group/project-7.git");
    await repo.commit({ [PROD]: level("debug") });
    gitaly = await startGitaly();
    const secret = new Uint8Array(randomBytes(32));
    gitlab = await GitLabApiServer.start({
      secret,
      agents: {
        [AGENT_TOKEN]: {
          agentId: 42,
          projectId: 7,
          agentName: "prod",
          gitalyAddress: gitaly.address,
          gitalyToken: GITALY_TOKEN,
        },
      },
    });
    const secretFile = join(dir, "gitlab_secret");
    await writeFile(secretFile, Buffer.from(secret).toString("base64"));
    kas = await startInProcessKas(
      (config) => {
        config.agent.staticTokensFile = undefined; // GitLab only
        config.gitlab.address = gitlab.url;
        config.gitlab.authenticationSecretFile = secretFile;
        config.agent.configuration.pollPeriodMs = 3_600_000; // only pushes poll
      },
      { log },
    );
    agent = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: AGENT_TOKEN });
  });
  afterAll(async () => {
    await agent?.stop();
    await kas?.close();
    await Promise.all([gitaly?.close(), gitlab?.close()]);
    await storage?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("the agent, known to GitLab, gets its file from Gitaly, with kas's Gitaly token", async () => {
    await until(() => levelOf() === "debug", 10_000, "the configuration from Gitaly");
    expect(gitlab.agentInfoRequests).toBeGreaterThan(0);
    // The project's only agent here reads its own file: one TreeEntry, no listing and batch
    // (gitaly-batch.test.ts reads several agents' files together).
    expect(gitaly.calls("TreeEntry")).toBeGreaterThan(0);
    expect(gitaly.calls("GetTreeEntries")).toBe(0);
    expect(gitaly.calls("GetBlobs")).toBe(0);
    // Every call carried a v2 token (checked by the server), never the secret itself.
    for (const call of gitaly.seen) {
      expect(call.metadata.authorization).toMatch(/^Bearer v2\.[0-9a-f]{64}\.\d+$/);
      expect(JSON.stringify(call.metadata)).not.toContain(GITALY_TOKEN);
    }
  });

  test("a change and a push notification arrive", async () => {
    const commitId = await repo.commit({ [PROD]: level("warn") });
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(() => levelOf() === "warn", 10_000, "the pushed configuration");
    expect((await shown(kas, 42)).body).toMatchObject({ commit_id: commitId });
    // By full path too (GitLab's gl_project_path).
    await repo.commit({ [PROD]: level("info") });
    expect(await pushTo(kas, { full_path: "group/project-7" })).toBe(204);
    await until(() => levelOf() === "info", 10_000, "the configuration pushed by path");
  });

  test("Gitaly unreachable: the agent keeps its configuration, kas stays ready with a detail, the error is counted and shown", async () => {
    const kept = agent.agent.configuration.current;
    const unavailable = async () =>
      metricValue(await kasMetrics(), "kas_agent_configuration_repository_errors_total", {
        code: "unavailable",
      });
    const errorsBefore = await unavailable();
    await gitaly.close();
    await repo.commit({ [PROD]: level("error") }); // a change kas cannot see
    expect(await pushTo(kas, { id: 7 })).toBe(204);
    await until(async () => (await unavailable()) > errorsBefore, 10_000, "an unavailable error counted");
    const afterFirst = await unavailable();
    expect(await pushTo(kas, { id: 7 })).toBe(204); // and the next poll fails too
    await until(async () => (await unavailable()) > afterFirst, 10_000, "a second poll failing");

    expect(agent.agent.configuration.current).toBe(kept);
    expect(levelOf()).toBe("info");

    const readiness = await fetch(`${kas.addresses.observability}/readiness`);
    expect(readiness.status).toBe(200);
    const body = (await readiness.json()) as {
      status: string;
      checks: Array<{ name: string; detail?: string }>;
    };
    expect(body.status).toBe("ready");
    const check = body.checks.find((c) => c.name === "agent_configuration");
    expect(check?.detail).toMatch(/1 configuration project\(s\) cannot be read/);
    expect(check?.detail).toContain("UNAVAILABLE");
    expect(check?.detail).not.toContain(GITALY_TOKEN);

    const { body: api } = await shown(kas, 42);
    expect(api.last_error?.kind).toBe("repository");
    expect(api.last_error?.message).toContain("UNAVAILABLE");
    expect(api.configuration.observability.logging.level).toBe("info"); // the last good one
  });

  test("Gitaly back: a push gets the next change through, the detail and the error clear", async () => {
    gitaly = await startGitaly();
    const commitId = await repo.commit({ [PROD]: level("warn") });
    // The channel to Gitaly may still be backing off its reconnects: GitLab's next push (here, the
    // same one again) polls again. Bounded; one push at a time, each after the previous poll ended.
    const polls = async () => metricValue(await kasMetrics(), "kas_agent_configuration_polls_total");
    await until(
      async () => {
        const before = await polls();
        await pushTo(kas, { id: 7 });
        await until(async () => (await polls()) > before, 10_000, "the push's poll");
        return (await shown(kas, 42)).body.commit_id === commitId;
      },
      15_000,
      "the change read after Gitaly came back",
    );
    await until(() => levelOf() === "warn", 10_000, "the change on the agent");
    const { body: api } = await shown(kas, 42);
    expect(api.commit_id).toBe(commitId);
    expect(api.last_error).toBeUndefined();
    const readiness = (await (await fetch(`${kas.addresses.observability}/readiness`)).json()) as {
      checks: Array<{ name: string; detail?: string }>;
    };
    expect(readiness.checks.find((c) => c.name === "agent_configuration")?.detail).toBeUndefined();
  });

  test("the Gitaly token never appears in kas's logs", () => {
    const text = lines.join("");
    expect(text).toContain("cannot read agent configuration project"); // the outage was logged
    expect(text).not.toContain(GITALY_TOKEN);
    expect(text).not.toContain(AGENT_TOKEN);
  });
});
