// ProjectAccess on its own: GitLab's project_info answers mapped to forbidden / not_found /
// unavailable (never cached), answers cached per token and project; the static tokens file's
// manifest_projects, checked with errors that name the entry and never the token.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { GitLabProjectAccess, StaticProjectAccess } from "../../../../cmd/kas/auth/project-access.ts";
import {
  parseStaticTokens,
  StaticTokenAuthenticator,
} from "../../../../cmd/kas/auth/static-authenticator.ts";
import { type AgentIdentity, ProjectAccessError } from "../../../../modules/runtime/index.ts";
import { AgentToken } from "../../../../tool/agent-token.ts";
import { GitLabClient } from "../../../../tool/gitlab/index.ts";
import { GitLabApiServer } from "../../../support/gitlab-api.ts";

const TOKEN = "glagent-project-access-Hq3vN8sL";
const STRANGER = "glagent-unknown-Pz9kR2wT";

const identity = (token: string): AgentIdentity => ({
  agentId: "42",
  projectId: "7",
  agentName: "prod",
  token: new AgentToken(token),
  gitalyInfo: { address: "tcp://127.0.0.1:1", features: {} },
});

async function refusal(p: Promise<unknown>): Promise<ProjectAccessError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProjectAccessError);
  return err as ProjectAccessError;
}

describe("GitLabProjectAccess (project_info)", () => {
  let gitlab: GitLabApiServer;
  let client: GitLabClient;
  let access: GitLabProjectAccess;
  let now = 0;

  beforeAll(async () => {
    const secret = new Uint8Array(randomBytes(32));
    gitlab = await GitLabApiServer.start({
      secret,
      agents: { [TOKEN]: { agentId: 42, projectId: 7, agentName: "prod" } },
      projects: [
        { projectId: 99, path: "group/manifests" },
        { projectId: 100, path: "group/private", readers: [] },
      ],
    });
    client = new GitLabClient({ gitlabUrl: gitlab.url, secret, maxAttempts: 1 });
    access = new GitLabProjectAccess(client, {
      ttlMs: 1000,
      errorTtlMs: 500,
      now: () => now,
    });
  });
  afterAll(async () => {
    await client?.close();
    await gitlab?.close();
  });

  test("200: a Gitaly location and GitLab's id, by path or by id; cached per token and project until the TTL", async () => {
    const before = gitlab.projectInfoRequests;
    const byPath = await access.repositoryFor(identity(TOKEN), "group/manifests");
    expect(byPath.projectId).toBe("99");
    expect(byPath.location).toMatchObject({
      backend: "gitaly",
      repository: {
        storageName: "default",
        relativePath: "group/manifests.git",
        glProjectPath: "group/manifests",
      },
    });
    expect((await access.repositoryFor(identity(TOKEN), "99")).projectId).toBe("99");
    await access.repositoryFor(identity(TOKEN), "group/manifests");
    expect(gitlab.projectInfoRequests - before).toBe(2); // the path and the id, each once
    now += 1001;
    await access.repositoryFor(identity(TOKEN), "group/manifests");
    expect(gitlab.projectInfoRequests - before).toBe(3);
  });

  test("403 and 401: forbidden; 404: not_found; 5xx: unavailable, not cached", async () => {
    expect((await refusal(access.repositoryFor(identity(TOKEN), "group/private"))).code).toBe("forbidden");
    expect((await refusal(access.repositoryFor(identity(STRANGER), "group/manifests"))).code).toBe(
      "forbidden",
    );
    const missing = await refusal(access.repositoryFor(identity(TOKEN), "group/nothing"));
    expect(missing.code).toBe("not_found");
    expect(missing.message).toContain('project "group/nothing"');
    expect(missing.message).not.toContain(TOKEN);

    gitlab.failNext({ status: 502 });
    const down = await refusal(access.repositoryFor(identity(TOKEN), "group/other-1"));
    expect(down.code).toBe("unavailable");
    expect(down.message).toContain("HTTP 502");
    // Not cached: the next lookup asks again, and GitLab answers now.
    expect((await refusal(access.repositoryFor(identity(TOKEN), "group/other-1"))).code).toBe("not_found");
  });
});

describe("static tokens file: manifest_projects", () => {
  test("an agent reads the projects of its entry, from local repositories; any other is forbidden", async () => {
    const tokens = parseStaticTokens(
      `${TOKEN}: {agentId: 42, projectId: 7, agentName: prod, manifest_projects: {"group/manifests": /srv/git/manifests.git}}\n`,
    );
    const info = await new StaticTokenAuthenticator(tokens).authenticateAgent(TOKEN);
    expect(info.localManifestProjects).toEqual({ "group/manifests": "/srv/git/manifests.git" });
    const agent = { ...info, token: new AgentToken(TOKEN) };
    const access = new StaticProjectAccess();
    expect(await access.repositoryFor(agent, "group/manifests")).toEqual({
      projectId: "",
      location: { backend: "local", path: "/srv/git/manifests.git" },
    });
    for (const project of ["group/other", "constructor", "99"]) {
      const err = await refusal(access.repositoryFor(agent, project));
      expect(err.code).toBe("forbidden");
      expect(err.message).toContain("not among the manifest projects of agent 42");
    }
  });

  test.each([
    [
      "a relative repository path",
      `{"group/p": relative/path}`,
      /entry #1: manifest_projects\.group\/p: expected the absolute path/,
    ],
    [
      "a numeric project",
      `{"99": /srv/x}`,
      /entry #1: manifest_projects: "99": expected a project's full path/,
    ],
    ["a list", `[/srv/x]`, /entry #1: manifest_projects: expected a mapping/],
  ])("refused with the entry named, never the token: %s", (_, value, message) => {
    const text = `${TOKEN}: {agentId: 42, projectId: 7, agentName: prod, manifest_projects: ${value}}\n`;
    expect(() => parseStaticTokens(text, "tokens.yaml")).toThrow(message);
    try {
      parseStaticTokens(text, "tokens.yaml");
    } catch (err) {
      expect((err as Error).message).not.toContain(TOKEN);
    }
  });
});
