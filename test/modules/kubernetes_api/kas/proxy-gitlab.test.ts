// kas's calls to GitLab for the Kubernetes API proxy against the GitLab API test server: the wire
// (Job-Token, kas's JWT, the JSON body), GitLab's answers read, and the cache (one request per
// token however many callers at once; refusals for the error TTL; "GitLab down" never cached).
// No kas configuration module runs here: GitLab's copy of the agents' configurations is set through
// the same path kas's agent_configuration post takes (takeConfiguration).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ProxyAccessError } from "../../../../modules/kubernetes_api/kas/access.ts";
import { GitLabProxyAuthorization } from "../../../../modules/kubernetes_api/kas/proxy-gitlab.ts";
import { GitLabClient } from "../../../../tool/gitlab/index.ts";
import {
  ALLOWED_AGENTS_PATH,
  AUTHORIZE_PROXY_USER_PATH,
  GitLabApiServer,
} from "../../../support/gitlab-api.ts";

let gitlab: GitLabApiServer;
let client: GitLabClient;
let gl: GitLabProxyAuthorization;
let now = 0;
const calls = (path: string) => gitlab.requests.filter((r) => r.path === path).length;

beforeAll(async () => {
  const secret = new Uint8Array(randomBytes(32));
  gitlab = await GitLabApiServer.start({ secret });
  // Agents 42 and 43, both configured in group/project-7; group (55) > group/sub (56) > group/sub/app.
  gitlab.addGroup({ id: 55, path: "group" });
  gitlab.addGroup({ id: 56, path: "group/sub" });
  gitlab.addAgent("agent-42-token", { agentId: 42, projectId: 7, agentName: "prod" });
  gitlab.addAgent("agent-43-token", { agentId: 43, projectId: 7, agentName: "other" });
  gitlab.addProject({ projectId: 100, path: "group/sub/app" });
  gitlab.addProject({ projectId: 104, path: "group/release" });
  gitlab.addProject({ projectId: 1, path: "a/b" });
  gitlab.takeConfiguration(42, {
    ci_access: {
      projects: [
        { id: "group/sub/app", default_namespace: "apps", access_as: { ci_job: {} } },
        { id: "group/release", protected_branches_only: true },
      ],
    },
    user_access: { access_as: { agent: {} }, projects: [{ id: "group/sub/app" }] },
  });
  gitlab.takeConfiguration(43, { ci_access: { projects: [{ id: "group/release" }] } });
  gitlab.addJob("job-a", {
    jobId: 9,
    pipelineId: 8,
    projectId: 100,
    user: { id: 5, username: "runner" },
    environment: { name: "prod", tier: "production" },
  });
  gitlab.addProxyUser("pat-a", { id: 11, username: "alice", accessType: "personal_access_token" });
  gitlab.addMember(11, { projectId: 100 }, "developer");
  client = new GitLabClient({ gitlabUrl: gitlab.url, secret, maxAttempts: 1 });
  gl = new GitLabProxyAuthorization(client, {
    ttlMs: 1000,
    errorTtlMs: 500,
    now: () => now,
  });
});
afterAll(async () => {
  await client?.close();
  await gitlab?.close();
});

async function refusal(p: Promise<unknown>): Promise<ProxyAccessError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProxyAccessError);
  return err as ProxyAccessError;
}

describe("allowed_agents", () => {
  test("GitLab's answer, read with its wire names; 20 callers at once share one request; cached until the TTL", async () => {
    const before = calls(ALLOWED_AGENTS_PATH);
    const answers = await Promise.all(Array.from({ length: 20 }, () => gl.allowedAgentsForJob("job-a")));
    expect(calls(ALLOWED_AGENTS_PATH) - before).toBe(1);
    expect(answers[0]).toEqual({
      allowedAgents: [
        {
          id: "42",
          configProjectId: "7",
          configuration: { defaultNamespace: "apps", accessAs: { ci_job: {} } },
        },
      ],
      job: { id: "9" },
      pipeline: { id: "8" },
      // As Rails sends it: ids only, no paths.
      project: { id: "100", groups: [{ id: "55" }, { id: "56" }] },
      user: { id: "5", username: "runner" },
      environment: { slug: "prod", tier: "production" },
    });
    expect(gitlab.requests.at(-1)?.jobToken).toBe("job-a");
    await gl.allowedAgentsForJob("job-a");
    expect(calls(ALLOWED_AGENTS_PATH) - before).toBe(1);
    now += 1001;
    await gl.allowedAgentsForJob("job-a");
    expect(calls(ALLOWED_AGENTS_PATH) - before).toBe(2);
  });

  test("an unknown token: 401, cached for the error TTL; GitLab failing: 503, never cached; a body of the wrong shape: 503", async () => {
    const before = calls(ALLOWED_AGENTS_PATH);
    expect((await refusal(gl.allowedAgentsForJob("nope"))).status).toBe(401);
    expect((await refusal(gl.allowedAgentsForJob("nope"))).status).toBe(401);
    expect(calls(ALLOWED_AGENTS_PATH) - before).toBe(1);
    now += 501;
    await refusal(gl.allowedAgentsForJob("nope"));
    expect(calls(ALLOWED_AGENTS_PATH) - before).toBe(2);

    gitlab.failNext({ status: 500 });
    expect((await refusal(gl.allowedAgentsForJob("job-b"))).status).toBe(503);
    // A project outside the agents' root group: none of their ci_access counts for it.
    gitlab.addJob("job-b", { jobId: 1, pipelineId: 1, projectId: 1, user: { id: 1, username: "u" } });
    expect((await gl.allowedAgentsForJob("job-b")).allowedAgents).toEqual([]);

    gitlab.failNext({ status: 200, body: JSON.stringify({ allowed_agents: [], job: { id: 1 } }) });
    const shape = await refusal(gl.allowedAgentsForJob("job-c"));
    expect(shape.status).toBe(503);
    expect(shape.message).toContain("unexpected allowed_agents response: project: expected an object");
  });
});

describe("allowed_agents and protected_branches_only", () => {
  test("GitLab lists an agent whose entry has protected_branches_only only for a job of a protected ref", async () => {
    // Agent 42's entry for group/release has protected_branches_only, agent 43's has not.
    const job = (protectedRef: boolean) => ({
      jobId: 2,
      pipelineId: 3,
      projectId: 104,
      user: { id: 5, username: "runner" },
      protectedRef,
    });
    gitlab.addJob("job-protected", job(true));
    gitlab.addJob("job-unprotected", job(false));
    const onTag = await gl.allowedAgentsForJob("job-protected");
    expect(onTag.allowedAgents.map((a) => a.id)).toEqual(["42", "43"]);
    const onBranch = await gl.allowedAgentsForJob("job-unprotected");
    expect(onBranch.allowedAgents.map((a) => a.id)).toEqual(["43"]);
  });
});

describe("authorize_proxy_user", () => {
  test("POST with kas's JWT and GitLab's body; a refused or unknown user is 401 (cached), GitLab failing 503", async () => {
    const auth = await gl.authorizeProxyUser({
      agentId: "42",
      accessType: "personal_access_token",
      accessKey: "pat-a",
    });
    expect(auth).toEqual({
      agent: { id: "42", configProjectId: "7" },
      user: { id: "11", username: "alice" },
      accessAs: { agent: {} },
    });
    const sent = gitlab.requests.findLast((r) => r.path === AUTHORIZE_PROXY_USER_PATH)!;
    expect(sent.method).toBe("POST");
    expect(sent.jwt.ok).toBe(true);
    expect(sent.body).toEqual({ agent_id: 42, access_type: "personal_access_token", access_key: "pat-a" });

    const forbidden = await refusal(
      gl.authorizeProxyUser({ agentId: "43", accessType: "personal_access_token", accessKey: "pat-a" }),
    );
    expect(forbidden.status).toBe(401); // GitLab's 403 for a user: 401, as in GitLab's kas
    // A token GitLab finds no user for: its 400, the client's fault: 401, cached like a refusal.
    const before = calls(AUTHORIZE_PROXY_USER_PATH);
    const nobody = { agentId: "42", accessType: "personal_access_token", accessKey: "glpat-nobody" } as const;
    const unknown = await refusal(gl.authorizeProxyUser(nobody));
    expect(unknown.status).toBe(401);
    expect(unknown.message).toContain("Unable to get user from request data");
    expect((await refusal(gl.authorizeProxyUser(nobody))).status).toBe(401);
    expect(calls(AUTHORIZE_PROXY_USER_PATH) - before).toBe(1);
    gitlab.failNext({ status: 503 });
    const down = await refusal(
      gl.authorizeProxyUser({ agentId: "42", accessType: "session_cookie", accessKey: "s", csrfToken: "c" }),
    );
    expect(down.status).toBe(503);
  });
});
