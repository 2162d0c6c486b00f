// Manifest projects from Gitaly, as GitLab runs it: the agent is authenticated by GitLab's API (test
// server), kas asks that API's project_info (the agent's token, kas's JWT) whether the agent may
// read the manifest project and where it is, and reads it from a real git repository behind the
// Gitaly test server. Refusals of project_info are PERMISSION_DENIED / NOT_FOUND; answers are cached.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { GitopsServiceClient } from "../../../../proto/gen/gitops/v1/gitops.ts";
import { type InProcessKas, startInProcessKas } from "../../../kas/support/in-process.ts";
import type { InProcessAgentk } from "../../../support/agentk-in-process.ts";
import { type TestRepo, TestStorage } from "../../../support/git-repo.ts";
import { GitalyTestServer } from "../../../support/gitaly-server.ts";
import { GitLabApiServer, PROJECT_INFO_PATH } from "../../../support/gitlab-api.ts";
import { until } from "../../../support/until.ts";
import { pushTo } from "../../agent_configuration/helpers.ts";
import { agentWithRawClient, openStream, request, texts } from "./helpers.ts";

const AGENT_TOKEN = "glagent-gitops-gitaly-Zr4pW8kT2mQ6";
const GITALY_TOKEN = "gitaly-shared-secret-gitops-7d2e9b";

describe("GitOps manifests from Gitaly (agent and project access by GitLab)", () => {
  let dir: string;
  let storage: TestStorage;
  let repo: TestRepo;
  let gitaly: GitalyTestServer;
  let gitlab: GitLabApiServer;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let client: GitopsServiceClient;
  let first: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gitops-gitaly-"));
    storage = await TestStorage.create();
    // project_info's gitaly_repository for group/manifests: storage "default", group/manifests.git.
    repo = await storage.init("group/manifests.git");
    first = await repo.commit({ "deploy/app.yaml": "kind: Deployment\n", "deploy/.skip.yaml": "kind: X\n" });
    gitaly = await GitalyTestServer.start({ storages: { default: storage.root }, token: GITALY_TOKEN });
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
      projects: [
        { projectId: 99, path: "group/manifests", gitalyAddress: gitaly.address, gitalyToken: GITALY_TOKEN },
        {
          projectId: 100,
          path: "group/private",
          gitalyAddress: gitaly.address,
          gitalyToken: GITALY_TOKEN,
          readers: [],
        },
      ],
    });
    const secretFile = join(dir, "gitlab_secret");
    await writeFile(secretFile, Buffer.from(secret).toString("base64"));
    kas = await startInProcessKas((config) => {
      config.agent.staticTokensFile = undefined; // GitLab only
      config.gitlab.address = gitlab.url;
      config.gitlab.authenticationSecretFile = secretFile;
      config.agent.configuration.pollPeriodMs = 3_600_000;
      config.agent.gitops.pollPeriodMs = 3_600_000; // only pushes poll
    });
    ({ agent, client } = await agentWithRawClient(kas.addresses.agent, AGENT_TOKEN));
  });
  afterAll(async () => {
    client?.close();
    await agent?.stop();
    await kas?.close();
    await Promise.all([gitaly?.close(), gitlab?.close()]);
    await storage?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("by full path: project_info with the agent's token and kas's JWT, files from Gitaly, GitLab's project id in the header", async () => {
    const stream = openStream(client, request("group/manifests", ["deploy/**/*.yaml"]));
    try {
      await until(() => stream.commits().length > 0, 10_000, "a commit from Gitaly");
      const [commit] = stream.commits();
      expect(commit!.commitId).toBe(first);
      expect(commit!.projectId).toBe("99");
      expect(texts(commit!)).toEqual({ "deploy/app.yaml": "kind: Deployment\n" });
      const asked = gitlab.requests.filter((r) => r.path === PROJECT_INFO_PATH);
      expect(asked.length).toBe(1);
      expect(asked[0]!.agentToken).toBe(AGENT_TOKEN);
      expect(asked[0]!.jwt.ok).toBe(true);
      // A commit's files: one listing, one GetBlobs for all of them, no TreeEntry per file.
      expect(gitaly.calls("GetTreeEntries")).toBeGreaterThan(0);
      expect(gitaly.calls("GetBlobs")).toBeGreaterThan(0);
      expect(gitaly.calls("TreeEntry")).toBe(0);

      // A push by GitLab's numeric id reaches the stream (the id came from project_info).
      const next = await repo.commit({ "deploy/app.yaml": "kind: Deployment\nspec: {}\n" });
      expect(await pushTo(kas, { id: 99 })).toBe(204);
      await until(() => stream.commits().length > 1, 10_000, "the pushed commit");
      expect(stream.commits()[1]!.commitId).toBe(next);
    } finally {
      stream.cancel();
    }
    // A second stream for the same project: project_info's answer is cached.
    const again = openStream(client, request("group/manifests", ["deploy/*.yaml"]));
    try {
      await until(() => again.commits().length > 0, 10_000, "a commit");
      expect(gitlab.projectInfoRequests).toBe(1);
    } finally {
      again.cancel();
    }
  });

  test("project_info refuses (403): PERMISSION_DENIED; an unknown project (404): NOT_FOUND", async () => {
    const denied = openStream(client, request("group/private", ["*.yaml"]));
    await until(() => denied.status !== undefined, 10_000, "the refusal");
    expect(denied.status!.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(denied.status!.details).toContain('project "group/private": GitLab refuses the agent access');
    const unknown = openStream(client, request("12345", ["*.yaml"]));
    await until(() => unknown.status !== undefined, 10_000, "the refusal");
    expect(unknown.status!.code).toBe(grpc.status.NOT_FOUND);
    expect(unknown.status!.details).toContain('project "12345"');
  });
});
