// observability.usage_reporting_period at its ends, with kas in this process and GitLab's API test
// server: a period longer than kas lives still delivers its counts, in the last report kas sends
// as it stops; a period of 0 sends nothing, not even then; GitLab down at that moment does not hold
// kas's stop beyond its deadline. The count is a user's request through the Kubernetes API proxy
// (a personal access token GitLab vouches for; no agent is connected, so the request itself ends
// in 503 after agent.dial_timeout, yet it was authorized, which is what is counted).
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startInProcessKas } from "../../kas/support/in-process.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";

let dir: string;
let gitlab: GitLabApiServer;
let secretFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "usage-shutdown-"));
  const secret = new Uint8Array(randomBytes(32));
  gitlab = await GitLabApiServer.start({ secret });
  // Alice, a developer of agent 42's configuration project, which its user_access names (as if
  // kas had posted that configuration before).
  gitlab.addAgent("agent-42-in-gitlab", { agentId: 42, projectId: 7, agentName: "prod" });
  gitlab.addProxyUser("pat-of-alice", { id: 11, username: "alice", accessType: "personal_access_token" });
  gitlab.addMember(11, { projectId: 7 }, "developer");
  gitlab.takeConfiguration(42, {
    user_access: { access_as: { agent: {} }, projects: [{ id: "group/project-7" }] },
  });
  secretFile = join(dir, "gitlab_secret");
  await writeFile(secretFile, Buffer.from(secret).toString("base64"));
});
afterAll(async () => {
  await gitlab?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** kas with this period; one authorized proxy request; kas stopped. */
async function oneRequestThenStop(periodMs: number): Promise<void> {
  const kas = await startInProcessKas((c) => {
    c.gitlab.address = gitlab.url;
    c.gitlab.authenticationSecretFile = secretFile;
    c.observability.usageReportingPeriodMs = periodMs;
  });
  try {
    const res = await fetch(`${kas.addresses.kubernetesApi}/api/v1/pods`, {
      headers: { authorization: "Bearer pat:42:pat-of-alice" },
    });
    await res.arrayBuffer();
    expect(res.status).toBe(503); // authorized; agent 42 is not connected
  } finally {
    await kas.close();
  }
}

test("a period longer than kas lives: the counts go to GitLab in the last report, as kas stops", async () => {
  const before = gitlab.usageMetrics.posts.length;
  await oneRequestThenStop(3_600_000);
  expect(gitlab.usageMetrics.posts.slice(before)).toEqual([
    {
      counters: { k8s_api_proxy_request: 1, k8s_api_proxy_requests_via_pat_access: 1 },
      uniqueCounters: {
        agent_users_using_ci_tunnel: [11],
        k8s_api_proxy_requests_unique_users_via_pat_access: [11],
        k8s_api_proxy_requests_unique_agents_via_pat_access: [42],
      },
    },
  ]);
});

test("a period of 0: nothing is sent to GitLab, not even as kas stops", async () => {
  const before = gitlab.usageMetrics.attempts.length;
  await oneRequestThenStop(0);
  expect(gitlab.usageMetrics.attempts.length).toBe(before);
});

test("GitLab failing as kas stops: the last report is tried once and kas stops all the same", async () => {
  const before = gitlab.usageMetrics.attempts.length;
  gitlab.usageMetrics.failNext(1, 503);
  await oneRequestThenStop(3_600_000);
  expect(gitlab.usageMetrics.attempts.slice(before).map((a) => a.status)).toEqual([503]);
});
