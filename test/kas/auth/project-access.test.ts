// Which project names reach GitLab's project_info at all, what each refusal says, which refusals
// are cached, and which agents ask GitLab rather than the static tokens file
// (createProjectAccessFromConfig). GitLab is the test server on loopback.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  createProjectAccessFromConfig,
  GitLabProjectAccess,
  PROJECT_INFO,
  projectNameProblem,
  StaticProjectAccess,
} from "../../../cmd/kas/auth/project-access.ts";
import type { KasConfig } from "../../../cmd/kas/config/index.ts";
import { type AgentIdentity, ProjectAccessError } from "../../../modules/runtime/kas.ts";
import { AgentToken } from "../../../tool/agent-token.ts";
import { GitLabClient } from "../../../tool/gitlab/index.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";

const TOKEN = "glagent-project-names-Vb7nQ2xK";
const GITALY = { address: "tcp://127.0.0.1:8075", token: "gitaly-secret", features: {} };

const viaGitLab = (token = TOKEN): AgentIdentity => ({
  agentId: "42",
  projectId: "7",
  agentName: "prod",
  token: new AgentToken(token),
  gitalyInfo: GITALY,
});
const local = (projects?: Record<string, string>): AgentIdentity => ({
  agentId: "5",
  projectId: "6",
  agentName: "dev",
  token: new AgentToken("dev-token"),
  ...(projects !== undefined && { localManifestProjects: projects }),
});

async function refusal(p: Promise<unknown>): Promise<ProjectAccessError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProjectAccessError);
  return err as ProjectAccessError;
}

describe("projectNameProblem", () => {
  test.each([
    "1",
    "9",
    "10",
    "9223372036854775807", // 19 digits: an int64 id
    "group/project",
    "group/sub/project-1",
    "g1/p2",
    "1group/p",
    "project", // a top-level path is a path
    "a b/c d", // GitLab checks what its paths may hold; only what cannot be one is refused here
    "x".repeat(1024),
  ])("%j is a project name", (name) => {
    expect(projectNameProblem(name)).toBeUndefined();
  });

  test.each([
    ["", "is empty"],
    ["x".repeat(1025), "is longer than 1024 characters"],
    ["1".repeat(1025), "is longer than 1024 characters"],
    ["0", "is not a valid id"],
    ["01", "is not a valid id"],
    ["12345678901234567890", "is not a valid id"], // 20 digits: beyond int64
    ["a\x00b", "contains control characters"],
    ["a\x1fb", "contains control characters"],
    ["a\x7f", "contains control characters"],
    ["group/\nproject", "contains control characters"],
    ["/group/project", "has an empty path component"],
    ["group/project/", "has an empty path component"],
    ["group//project", "has an empty path component"],
    ["/", "has an empty path component"],
  ])("%j %s", (name, problem) => {
    expect(projectNameProblem(name)).toBe(problem);
  });
});

describe("PROJECT_INFO (an answer as Redis holds it)", () => {
  const repository = {
    projectId: "99",
    location: {
      backend: "gitaly" as const,
      gitaly: { address: "tcp://127.0.0.1:8075", token: "gitaly-secret", features: {} },
      repository: {
        storageName: "default",
        relativePath: "group/manifests.git",
        glRepository: "project-99",
        glProjectPath: "group/manifests",
      },
    },
  };
  /** Through the JSON that is sealed into Redis and back. */
  const roundTrip = (answer: Parameters<typeof PROJECT_INFO.encode>[0]) =>
    PROJECT_INFO.decode(JSON.parse(JSON.stringify(PROJECT_INFO.encode(answer))));

  test("a repository and a definitive refusal come back as they went in", () => {
    expect(roundTrip({ value: repository })).toEqual({ value: repository });
    for (const code of ["not_found", "forbidden"] as const) {
      const back = roundTrip({ error: new ProjectAccessError(code, `project "x": ${code}`) });
      expect(back).toEqual({ error: expect.any(ProjectAccessError) });
      const error = (back as { error: ProjectAccessError }).error;
      expect([error.code, error.message]).toEqual([code, `project "x": ${code}`]);
    }
  });

  test("a refusal's message is stored up to 2000 characters", () => {
    const stored = PROJECT_INFO.encode({ error: new ProjectAccessError("forbidden", "x".repeat(5000)) });
    expect(stored).toEqual({ code: "forbidden", message: "x".repeat(2000) });
  });

  const withLocation = (location: object) => ({ repository: { ...repository, location } });
  test.each([
    ["nothing", undefined],
    ["null", null],
    ["a number", 42],
    ["a string", "project_info"],
    ["an empty object", {}],
    ["a repository that is null", { repository: null }],
    ["a repository without a location", { repository: { projectId: "99" } }],
    ["a repository whose id is a number", { repository: { ...repository, projectId: 99 } }],
    ["a local location", withLocation({ ...repository.location, backend: "local" })],
    ["no Gitaly server", withLocation({ backend: "gitaly", repository: repository.location.repository })],
    [
      "a Gitaly server without an address",
      withLocation({ ...repository.location, gitaly: { token: "gitaly-secret" } }),
    ],
    ["no repository in Gitaly", withLocation({ backend: "gitaly", gitaly: repository.location.gitaly })],
    [
      "a repository in Gitaly without a path",
      withLocation({ ...repository.location, repository: { storageName: "default" } }),
    ],
    ["an unavailable refusal", { code: "unavailable", message: "cannot ask GitLab now" }],
    ["a refusal of another code", { code: "unauthenticated", message: "no" }],
    ["a refusal without a message", { code: "forbidden" }],
    ["a refusal whose message is not text", { code: "not_found", message: 404 }],
  ])("%s (another version wrote it, or nothing valid) reads as no answer", (_, stored) => {
    expect(PROJECT_INFO.decode(stored)).toBeUndefined();
  });
});

describe("StaticProjectAccess", () => {
  test("a refused name is not_found, saying why and naming the project", async () => {
    const err = await refusal(new StaticProjectAccess().repositoryFor(local({ "": "/srv/x" }), ""));
    expect(err.code).toBe("not_found");
    expect(err.message).toBe('project "": the project name is empty');
  });

  test("an agent without manifest_projects may read none", async () => {
    const err = await refusal(new StaticProjectAccess().repositoryFor(local(), "group/p"));
    expect(err.code).toBe("forbidden");
    expect(err.message).toBe(
      'project "group/p": not among the manifest projects of agent 5 (manifest_projects of its entry in the static tokens file)',
    );
  });
});

describe("GitLabProjectAccess", () => {
  let gitlab: GitLabApiServer;
  let client: GitLabClient;
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
  });
  afterAll(async () => {
    await client?.close();
    await gitlab?.close();
  });

  const access = () => new GitLabProjectAccess(client, { ttlMs: 1000, errorTtlMs: 500, now: () => now });

  test("the answer: GitLab's id and the repository on the Gitaly server GitLab names", async () => {
    const repo = await access().repositoryFor(viaGitLab(), "group/manifests");
    expect(repo).toEqual({
      projectId: "99",
      location: {
        backend: "gitaly",
        gitaly: expect.objectContaining({ address: expect.any(String) }),
        repository: expect.objectContaining({ relativePath: "group/manifests.git" }),
      },
    });
  });

  test("a name that cannot be a project is refused without asking GitLab", async () => {
    const before = gitlab.projectInfoRequests;
    const err = await refusal(access().repositoryFor(viaGitLab(), "group//x"));
    expect(err.code).toBe("not_found");
    expect(err.message).toBe('project "group//x": the project name has an empty path component');
    expect(gitlab.projectInfoRequests).toBe(before);
  });

  test("each refusal says whose it is", async () => {
    const a = access();
    const forbidden = await refusal(a.repositoryFor(viaGitLab(), "group/private"));
    expect(forbidden.message).toMatch(/^project "group\/private": GitLab refuses the agent access: /);
    const unknown = await refusal(a.repositoryFor(viaGitLab("glagent-nobody-Lq2pX8vN"), "group/manifests"));
    expect(unknown.code).toBe("forbidden");
    expect(unknown.message).toMatch(/^project "group\/manifests": GitLab refuses the agent access: /);
    const missing = await refusal(a.repositoryFor(viaGitLab(), "group/none"));
    expect(missing.message).toMatch(
      /^project "group\/none": GitLab does not know it, or hides it from the agent: /,
    );
    gitlab.failNext({ status: 500 });
    const down = await refusal(a.repositoryFor(viaGitLab(), "group/down"));
    expect(down.code).toBe("unavailable");
    expect(down.message).toMatch(/^project "group\/down": cannot ask GitLab now: .*HTTP 500/);
  });

  test("definitive refusals are cached for the error TTL, per token and project", async () => {
    const a = access();
    const before = gitlab.projectInfoRequests;
    await refusal(a.repositoryFor(viaGitLab(), "group/private"));
    await refusal(a.repositoryFor(viaGitLab(), "group/private"));
    await refusal(a.repositoryFor(viaGitLab(), "group/none"));
    await refusal(a.repositoryFor(viaGitLab(), "group/none"));
    expect(gitlab.projectInfoRequests - before).toBe(2);
    now += 501;
    expect((await refusal(a.repositoryFor(viaGitLab(), "group/private"))).code).toBe("forbidden");
    expect(gitlab.projectInfoRequests - before).toBe(3);
  });

  test("a lookup that fails outside GitLab's client is unavailable, whatever was thrown", async () => {
    for (const [thrown, text] of [
      [new Error("socket gone"), "socket gone"],
      ["a string", "a string"],
      [null, "null"],
      [undefined, "undefined"],
    ] as const) {
      const failing = { request: () => Promise.reject(thrown) } as unknown as GitLabClient;
      const err = await refusal(new GitLabProjectAccess(failing).repositoryFor(viaGitLab(), "group/p"));
      expect(err.code).toBe("unavailable");
      expect(err.message).toBe(`project "group/p": cannot ask GitLab: ${text}`);
    }
  });
});

describe("createProjectAccessFromConfig", () => {
  let gitlab: GitLabApiServer;
  let client: GitLabClient;

  beforeAll(async () => {
    const secret = new Uint8Array(randomBytes(32));
    gitlab = await GitLabApiServer.start({
      secret,
      agents: { [TOKEN]: { agentId: 42, projectId: 7, agentName: "prod" } },
      projects: [
        { projectId: 99, path: "group/manifests" },
        { projectId: 100, path: "group/private", readers: [] },
        { projectId: 101, path: "group/other" },
      ],
    });
    client = new GitLabClient({ gitlabUrl: gitlab.url, secret, maxAttempts: 1 });
  });
  afterAll(async () => {
    await client?.close();
    await gitlab?.close();
  });

  /** The settings read here, at their defaults unless given (the rest is not read). */
  const config = (gitops: Partial<KasConfig["agent"]["gitops"]> = {}, infoCacheMaxEntries = 10_000) =>
    ({
      agent: {
        infoCacheMaxEntries,
        gitops: { projectInfoCacheTtlMs: 300_000, projectInfoCacheErrorTtlMs: 60_000, ...gitops },
      },
    }) as KasConfig;

  test("agents GitLab authenticated (they have a Gitaly server) ask GitLab; the others read their entry", async () => {
    const access = createProjectAccessFromConfig(config(), client);
    const before = gitlab.projectInfoRequests;
    expect((await access.repositoryFor(viaGitLab(), "group/manifests")).projectId).toBe("99");
    expect(gitlab.projectInfoRequests - before).toBe(1);
    expect(await access.repositoryFor(local({ "group/manifests": "/srv/m.git" }), "group/manifests")).toEqual(
      {
        projectId: "",
        location: { backend: "local", path: "/srv/m.git" },
      },
    );
    expect(gitlab.projectInfoRequests - before).toBe(1);
  });

  test("without GitLab, every agent reads its entry", async () => {
    const access = createProjectAccessFromConfig(config(), undefined);
    const err = await refusal(access.repositoryFor(viaGitLab(), "group/manifests"));
    expect(err.code).toBe("forbidden");
    expect(err.message).toContain("static tokens file");
  });

  test("the cache follows agent.gitops.project_info_cache_ttl and _error_ttl", async () => {
    const cached = createProjectAccessFromConfig(config(), client);
    const uncached = createProjectAccessFromConfig(
      config({ projectInfoCacheTtlMs: 0, projectInfoCacheErrorTtlMs: 0 }),
      client,
    );
    const asked = async (access: typeof cached, project: string) => {
      const before = gitlab.projectInfoRequests;
      for (let i = 0; i < 2; i++) await access.repositoryFor(viaGitLab(), project).catch(() => {});
      return gitlab.projectInfoRequests - before;
    };
    expect(await asked(cached, "group/manifests")).toBe(1);
    expect(await asked(cached, "group/private")).toBe(1);
    expect(await asked(uncached, "group/manifests")).toBe(2);
    expect(await asked(uncached, "group/private")).toBe(2);
  });

  test("the cache holds agent.info_cache_max_entries answers", async () => {
    const access = createProjectAccessFromConfig(config({}, 1), client);
    const before = gitlab.projectInfoRequests;
    for (const project of ["group/manifests", "group/other", "group/manifests"])
      await access.repositoryFor(viaGitLab(), project);
    expect(gitlab.projectInfoRequests - before).toBe(3);
  });
});
