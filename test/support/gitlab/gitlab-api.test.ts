// The GitLab API test server answers as Rails does, over its wire: allowed_agents and
// authorize_proxy_user derive from the agent_configuration posts (CiAccess / UserAccess refresh
// services, finders, FilterService, AuthorizeProxyUserService), and usage_metrics is read and
// recorded as Rails reads it. Each case names the Rails rule it checks.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { signKasApiJwt } from "../../../tool/gitlab/kas-jwt.ts";
import {
  AGENT_CONFIGURATION_PATH,
  ALLOWED_AGENTS_PATH,
  AUTHORIZE_PROXY_USER_PATH,
  GitLabApiServer,
  USAGE_METRICS_PATH,
} from "../gitlab-api.ts";

const secret = new Uint8Array(randomBytes(32));
let gitlab: GitLabApiServer;

// acme (1) > acme/team (2) > acme/team/sub (3); elsewhere is another root group.
const P = {
  agents: { projectId: 10, path: "acme/agents" },
  app: { projectId: 20, path: "acme/team/sub/app" },
  other: { projectId: 21, path: "acme/other" },
  teamApp: { projectId: 22, path: "acme/team/app" },
  foreign: { projectId: 30, path: "elsewhere/app" },
};

beforeAll(async () => {
  gitlab = await GitLabApiServer.start({ secret });
  gitlab.addGroup({ id: 1, path: "acme" });
  gitlab.addGroup({ id: 2, path: "acme/team" });
  gitlab.addGroup({ id: 3, path: "acme/team/sub" });
  for (const p of Object.values(P)) gitlab.addProject(p);
  // Agent 42 lives in acme/agents; agent 43 in acme/team/sub/app (the implicit authorization).
  gitlab.addAgent("token-42", { agentId: 42, projectId: 10, agentName: "prod", projectPath: P.agents.path });
  gitlab.addAgent("token-43", { agentId: 43, projectId: 20, agentName: "app", projectPath: P.app.path });
});
afterAll(async () => {
  await gitlab?.close();
});

async function post(path: string, body: unknown, jwt = true): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${gitlab.url}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(jwt && { "gitlab-kas-api-request": await signKasApiJwt(secret) }),
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : JSON.parse(text) };
}

const configure = async (agentId: number, agentConfig: Record<string, unknown>) =>
  expect(
    (await post(AGENT_CONFIGURATION_PATH, { agent_id: String(agentId), agent_config: agentConfig })).status,
  ).toBe(204);

let nextJob = 1;
/** allowed_agents for a new job of `project`: [agent id, configuration] pairs, and the whole body. */
async function allowed(
  project: { projectId: number },
  job: { environment?: string; protectedRef?: boolean } = {},
): Promise<{ agents: [number, unknown][]; body: Record<string, unknown> }> {
  const jobId = nextJob++;
  gitlab.addJob(`job-${jobId}`, {
    jobId,
    pipelineId: jobId,
    projectId: project.projectId,
    user: { id: 5, username: "runner" },
    ...(job.environment && { environment: { name: job.environment, tier: "production" } }),
    ...(job.protectedRef && { protectedRef: true }),
  });
  const res = await fetch(`${gitlab.url}${ALLOWED_AGENTS_PATH}`, {
    headers: { "job-token": `job-${jobId}` },
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { allowed_agents: { id: number; configuration: unknown }[] };
  return { agents: body.allowed_agents.map((a) => [a.id, a.configuration]), body };
}

describe("ci_access: refreshed by each post (CiAccess::RefreshService), found per job (CiAccess::Finder)", () => {
  test("before any post only the implicit authorization of the agent's own project; after, the project's entry, then its closest group's; paths outside the root group or unknown are ignored; a new post replaces the old", async () => {
    expect((await allowed(P.app)).agents).toEqual([[43, {}]]);
    expect((await allowed(P.other)).agents).toEqual([]);

    await configure(42, {
      ci_access: {
        projects: [
          { id: "ACME/Team/Sub/App", default_namespace: "app" },
          { id: "elsewhere/app" },
          { id: "acme/missing" },
        ],
        groups: [
          { id: "acme", default_namespace: "root" },
          { id: "acme/team", default_namespace: "team" },
        ],
      },
    });
    const app = await allowed(P.app);
    // The project's own entry (paths compare case-insensitively), then the implicit one.
    expect(app.agents).toEqual([
      [42, { default_namespace: "app" }],
      [43, {}],
    ]);
    // Rails' `project`: its id and its groups' ids, root first; no paths.
    expect(app.body.project).toEqual({ id: 20, groups: [{ id: 1 }, { id: 2 }, { id: 3 }] });
    expect((app.body.allowed_agents as unknown[])[0]).toMatchObject({
      config_project: { id: 10, path_with_namespace: "acme/agents" },
    });
    expect((await allowed(P.teamApp)).agents).toEqual([[42, { default_namespace: "team" }]]);
    expect((await allowed(P.other)).agents).toEqual([[42, { default_namespace: "root" }]]);
    expect((await allowed(P.foreign)).agents).toEqual([]);

    await configure(42, { ci_access: { groups: [{ id: "acme/team", default_namespace: "team" }] } });
    expect((await allowed(P.app)).agents).toEqual([
      [43, {}],
      [42, { default_namespace: "team" }],
    ]);
    expect((await allowed(P.other)).agents).toEqual([]);

    await configure(42, {});
    expect((await allowed(P.app)).agents).toEqual([[43, {}]]);
  });

  test("FilterService: environments match the job's environment name (equal, or `*` as Rails' unanchored regexp); protected_branches_only keeps an entry only for a protected ref", async () => {
    await configure(42, {
      ci_access: {
        projects: [{ id: P.other.path, environments: ["production", "review/*"] }],
        groups: [{ id: "acme/team", protected_branches_only: true, access_as: { ci_job: {} } }],
      },
    });
    const ids = async (...args: Parameters<typeof allowed>) =>
      (await allowed(...args)).agents.map(([id]) => id);
    expect(await ids(P.other, { environment: "production" })).toEqual([42]);
    const review = await allowed(P.other, { environment: "review/feature" });
    expect(review.agents.map(([id]) => id)).toEqual([42]);
    // Matched by name; answered with the slug Rails made of it (Gitlab::Slug::Environment), not the name.
    expect(review.body.environment).toEqual({ slug: "review-feature-3v0q3s", tier: "production" });
    expect(await ids(P.other, { environment: "old-review/feature" })).toEqual([42]);
    expect(await ids(P.other, { environment: "staging" })).toEqual([]);
    expect(await ids(P.other)).toEqual([]);

    expect(await ids(P.teamApp)).toEqual([]);
    expect((await allowed(P.teamApp, { protectedRef: true })).agents).toEqual([
      [42, { protected_branches_only: true, access_as: { ci_job: {} } }],
    ]);
    await configure(42, {});
  });

  test("an agent in a user's personal namespace: projects there only, no groups (its root is no group)", async () => {
    gitlab.addUser({ id: 20, username: "dave" });
    gitlab.addProject({ projectId: 40, path: "dave/tool" });
    gitlab.addAgent("token-44", { agentId: 44, projectId: 41, agentName: "own", projectPath: "dave/agents" });
    gitlab.takeConfiguration(44, {
      ci_access: { projects: [{ id: "dave/tool" }, { id: P.other.path }], groups: [{ id: "acme" }] },
    });
    expect((await allowed({ projectId: 40 })).agents).toEqual([[44, {}]]);
    expect((await allowed({ projectId: 40 })).body.project).toEqual({ id: 40, groups: [] });
    expect((await allowed(P.other)).agents).toEqual([]);
  });

  test("a post for an agent GitLab does not know: 404 over the wire, an error through takeConfiguration; nothing taken", async () => {
    const taken = gitlab.postedConfigurations.length;
    expect((await post(AGENT_CONFIGURATION_PATH, { agent_id: 99, agent_config: {} })).status).toBe(404);
    expect(() => gitlab.takeConfiguration(99, {})).toThrow("GitLab knows no agent 99");
    expect(gitlab.postedConfigurations.length).toBe(taken);
  });
});

describe("user_access: refreshed by each post (UserAccess::RefreshService), answered by AuthorizeProxyUserService", () => {
  beforeAll(() => {
    // alice: Developer of the app project; bob: Reporter of acme; carol: Maintainer of acme.
    gitlab.addProxyUser("pat-alice", { id: 11, username: "alice", accessType: "personal_access_token" });
    gitlab.addMember(11, { projectId: P.app.projectId }, "developer");
    gitlab.addProxyUser("pat-bob", { id: 12, username: "bob", accessType: "personal_access_token" });
    gitlab.addMember(12, { groupId: 1 }, "reporter");
    gitlab.addProxyUser("pat-carol", { id: 13, username: "carol", accessType: "personal_access_token" });
    gitlab.addMember(13, { groupId: 1 }, "maintainer");
  });
  const authorize = (key: string, agentId = 42) =>
    post(AUTHORIZE_PROXY_USER_PATH, {
      agent_id: agentId,
      access_type: "personal_access_token",
      access_key: key,
    });

  test("access_as user: the listed projects and groups where the user has Developer or more (inherited from ancestor groups), with every role up to theirs", async () => {
    await configure(42, {
      user_access: { access_as: { user: {} }, projects: [{ id: P.app.path }], groups: [{ id: "acme/team" }] },
    });
    const base = { agent: { id: 42, config_project: { id: 10 } } };
    expect(await authorize("pat-alice")).toEqual({
      status: 200,
      body: {
        ...base,
        user: { id: 11, username: "alice" },
        access_as: {
          user: { projects: [{ id: 20, roles: ["guest", "reporter", "developer"] }], groups: [] },
        },
      },
    });
    const upToMaintainer = ["guest", "reporter", "developer", "maintainer"];
    expect(await authorize("pat-carol")).toEqual({
      status: 200,
      body: {
        ...base,
        user: { id: 13, username: "carol" },
        access_as: {
          user: { projects: [{ id: 20, roles: upToMaintainer }], groups: [{ id: 2, roles: upToMaintainer }] },
        },
      },
    });
    expect(await authorize("pat-bob")).toEqual({
      status: 403,
      body: { message: "You must be a member of `projects` or `groups` under the `user_access` keyword." },
    });
  });

  test("access_as agent through a group; a post without user_access takes the access away; an unknown agent is 404, a token naming no user 400", async () => {
    await configure(42, { user_access: { access_as: { agent: {} }, groups: [{ id: "acme" }] } });
    // Under a group only a membership of it or an ancestor counts, Developer or more: not alice's of a project in it.
    expect(await authorize("pat-bob")).toMatchObject({ status: 403 });
    expect(await authorize("pat-alice")).toMatchObject({ status: 403 });
    expect(await authorize("pat-carol")).toMatchObject({ status: 200, body: { access_as: { agent: {} } } });
    await configure(42, { ci_access: {} });
    expect(await authorize("pat-carol")).toEqual({
      status: 403,
      body: { message: "`user_access` keyword is not found in agent config file." },
    });
    expect((await authorize("pat-alice", 99)).status).toBe(404);
    expect(await authorize("pat-nobody")).toEqual({
      status: 400,
      body: { message: "400 Bad request - Unable to get user from request data" },
    });
  });
});

describe("usage_metrics (API::Internal::Kubernetes)", () => {
  test("204 and recorded: the counters Rails counts (others dropped), integers as Grape coerces them", async () => {
    const taken = gitlab.usageMetrics.posts.length;
    const res = await post(USAGE_METRICS_PATH, {
      counters: { k8s_api_proxy_request: 3, flux_git_push_notifications_total: "2", not_a_counter: 9 },
      unique_counters: { k8s_api_proxy_requests_unique_users_via_ci_access: [5, "6"] },
    });
    expect(res.status).toBe(204);
    expect(gitlab.usageMetrics.posts[taken]).toEqual({
      counters: { k8s_api_proxy_request: 3, flux_git_push_notifications_total: 2 },
      uniqueCounters: { k8s_api_proxy_requests_unique_users_via_ci_access: [5, 6] },
    });
    expect((await post(USAGE_METRICS_PATH, {})).status).toBe(204);
    expect(gitlab.usageMetrics.posts.at(-1)).toEqual({ counters: {}, uniqueCounters: {} });
  });

  test("400 for a body Rails refuses, 401 without kas's JWT, the statuses a test asks for: none recorded", async () => {
    const taken = gitlab.usageMetrics.posts.length;
    for (const body of [
      { counters: [] },
      { counters: { k8s_api_proxy_request: 1.5 } },
      { counters: { k8s_api_proxy_request: -1 } },
      { unique_counters: { flux_git_push_notified_unique_projects: "7" } },
      { unique_counters: { flux_git_push_notified_unique_projects: ["x"] } },
    ]) {
      expect((await post(USAGE_METRICS_PATH, body)).status, JSON.stringify(body)).toBe(400);
    }
    expect((await post(USAGE_METRICS_PATH, {}, false)).status).toBe(401);
    gitlab.usageMetrics.failNext(1, 500);
    gitlab.usageMetrics.failNext(1, 503);
    expect((await post(USAGE_METRICS_PATH, {})).status).toBe(500);
    expect((await post(USAGE_METRICS_PATH, {})).status).toBe(503);
    expect(gitlab.usageMetrics.posts.length).toBe(taken);
    expect((await post(USAGE_METRICS_PATH, {})).status).toBe(204);
  });
});
