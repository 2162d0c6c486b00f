// GitLab's REST client on its own, against the GitLab API test server: each endpoint's wire (path,
// method, credentials, kas's JWT), and the typed error callers map to their own (kind, GitLab's
// status and message, retryable). The retries, timeouts and JWT in depth are the agent
// authenticator's tests (test/kas/auth/gitlab-authenticator.test.ts), which run through this client.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  AGENT_INFO_PATH,
  ALLOWED_AGENTS_PATH,
  AUTHORIZE_PROXY_USER_PATH,
  authorizeProxyUser,
  GitLabClient,
  GitLabError,
  getAgentInfo,
  getAllowedAgentsForJob,
  getProjectInfo,
  PROJECT_INFO_PATH,
} from "../../../tool/gitlab/index.ts";
import * as wire from "../../support/gitlab-api.ts";

const TOKEN = "glagent-client-test-Vb7nQ2xK";
let gitlab: wire.GitLabApiServer;
let client: GitLabClient;

beforeAll(async () => {
  const secret = new Uint8Array(randomBytes(32));
  gitlab = await wire.GitLabApiServer.start({
    secret,
    agents: { [TOKEN]: { agentId: 42, projectId: 7, agentName: "prod" } },
    projects: [{ projectId: 99, path: "group/manifests" }],
  });
  // GitLab's copy of agent 42's configuration (what kas's post sets): group/app's jobs and its
  // Developers may use the agent.
  gitlab.addProject({ projectId: 100, path: "group/app" });
  gitlab.takeConfiguration(42, {
    ci_access: { projects: [{ id: "group/app" }] },
    user_access: { access_as: { agent: {} }, projects: [{ id: "group/app" }] },
  });
  gitlab.addJob("job-a", { jobId: 9, pipelineId: 8, projectId: 100, user: { id: 5, username: "runner" } });
  gitlab.addProxyUser("pat-a", { id: 11, username: "alice", accessType: "personal_access_token" });
  gitlab.addMember(11, { projectId: 100 }, "developer");
  client = new GitLabClient({ gitlabUrl: gitlab.url, secret, maxAttempts: 2, backoff: { initialMs: 5 } });
});
afterAll(async () => {
  await client?.close();
  await gitlab?.close();
});

async function failure(p: Promise<unknown>): Promise<GitLabError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(GitLabError);
  return err as GitLabError;
}

describe("endpoints", () => {
  test("the paths are GitLab's", () => {
    expect([AGENT_INFO_PATH, PROJECT_INFO_PATH, ALLOWED_AGENTS_PATH, AUTHORIZE_PROXY_USER_PATH]).toEqual([
      wire.AGENT_INFO_PATH,
      wire.PROJECT_INFO_PATH,
      wire.ALLOWED_AGENTS_PATH,
      wire.AUTHORIZE_PROXY_USER_PATH,
    ]);
  });

  test("each asks with its credentials and kas's JWT, and reads GitLab's answer", async () => {
    expect(await getAgentInfo(client, TOKEN)).toMatchObject({
      agentId: "42",
      projectId: "7",
      agentName: "prod",
    });
    expect(await getProjectInfo(client, TOKEN, "group/manifests")).toMatchObject({
      projectId: "99",
      gitalyRepository: { glProjectPath: "group/manifests" },
    });
    expect((await getAllowedAgentsForJob(client, "job-a")).allowedAgents.map((a) => a.id)).toEqual(["42"]);
    expect(
      await authorizeProxyUser(client, {
        agentId: "42",
        accessType: "personal_access_token",
        accessKey: "pat-a",
      }),
    ).toMatchObject({ user: { username: "alice" }, accessAs: { agent: {} } });
    const sent = gitlab.requests.slice(-4);
    expect(sent.map((r) => [r.method, r.path])).toEqual([
      ["GET", AGENT_INFO_PATH],
      ["GET", PROJECT_INFO_PATH],
      ["GET", ALLOWED_AGENTS_PATH],
      ["POST", AUTHORIZE_PROXY_USER_PATH],
    ]);
    expect(sent.map((r) => r.jwt.ok)).toEqual([true, true, true, true]);
    expect(sent[0]!.agentToken).toBe(TOKEN);
    expect(sent[2]!.jobToken).toBe("job-a");
  });
});

describe("GitLabError", () => {
  test("a refusal: its kind, GitLab's status and message, not retryable, asked once", async () => {
    const before = gitlab.requests.length;
    const err = await failure(getProjectInfo(client, TOKEN, "group/nothing"));
    expect(err).toMatchObject({ kind: "not_found", status: 404, gitlabMessage: "404 Project Not Found" });
    expect(err.retryable).toBe(false);
    expect(err.message).toBe("no such project: 404 Project Not Found");
    expect(gitlab.requests.length - before).toBe(1);
    const unknown = await failure(getAgentInfo(client, "glagent-unknown"));
    expect(unknown).toMatchObject({ kind: "unauthenticated", status: 401 });
    expect(unknown.message).not.toContain("glagent-unknown");
  });

  test("authorize_proxy_user's 400 for a token naming no user: unauthenticated, asked once; elsewhere a 400 is unavailable", async () => {
    const before = gitlab.requests.length;
    const err = await failure(
      authorizeProxyUser(client, {
        agentId: "42",
        accessType: "personal_access_token",
        accessKey: "glpat-nobody",
      }),
    );
    expect(err).toMatchObject({
      kind: "unauthenticated",
      status: 400,
      gitlabMessage: "400 Bad request - Unable to get user from request data",
    });
    expect(err.retryable).toBe(false);
    expect(err.message).not.toContain("glpat-nobody");
    expect(gitlab.requests.length - before).toBe(1);
    gitlab.failNext({ status: 400 }, { status: 400 });
    const other = await failure(getAgentInfo(client, TOKEN));
    expect(other).toMatchObject({ kind: "unavailable", status: 400 });
  });

  test("GitLab failing: unavailable with its status, retryable, retried", async () => {
    gitlab.failNext({ status: 502 }, { status: 500, body: JSON.stringify({ message: "boom" }) });
    const err = await failure(getAgentInfo(client, TOKEN));
    expect(err).toMatchObject({ kind: "unavailable", status: 500, gitlabMessage: "boom" });
    expect(err.retryable).toBe(true);
    expect(gitlab.requests.slice(-2).map((r) => r.status)).toEqual([502, 500]);
  });

  test("an answer of the wrong shape: unavailable, naming the field, without a status", async () => {
    gitlab.failNext("wrong-shape", "wrong-shape");
    const err = await failure(getAgentInfo(client, TOKEN));
    expect(err).toMatchObject({ kind: "unavailable", status: undefined, gitlabMessage: "" });
    expect(err.message).toContain("agent_id: expected a positive integer id");
  });
});
