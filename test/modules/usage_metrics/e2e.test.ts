// Usage metrics end to end: kas (in this process, GitLab's API test server as its GitLab, a static
// token for agent 42 whose configuration and manifest project are local git repositories) and
// agentk (the Kubernetes test server as its cluster). Requests through the Kubernetes API proxy
// with each of GitLab's credentials and a commit sent to the agent show up in kas's posts to GitLab's `usage_metrics` endpoint under GitLab's kas's names; GitLab failing
// for two periods loses nothing; nothing is posted while there is nothing to report. The period is
// 100 ms; the tests wait on GitLab's recorded posts and kas's report metric, never on time.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { stringify } from "yaml";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { until } from "../../support/until.ts";

const MANIFESTS = "group/manifests";
const WAIT = 20_000;

let dir: string;
let kube: KubeApiServer;
let gitlab: GitLabApiServer;
let kas: InProcessKas;
let agent: InProcessAgentk;
const repos: GitRepo[] = [];

const usage = () => gitlab.usageMetrics;

/** kas_usage_metrics_reports_total{result}. */
async function reports(result: string): Promise<number> {
  const metric = kas.kas.metrics.registry.getSingleMetric("kas_usage_metrics_reports_total");
  const values = (await metric!.get()).values;
  return values.find((v) => v.labels.result === result)?.value ?? 0;
}

/** One request through the Kubernetes API proxy with `headers`; resolves with its status. */
async function proxied(headers: Record<string, string>): Promise<number> {
  const res = await fetch(`${kas.addresses.kubernetesApi}/api/v1/namespaces/default/configmaps`, { headers });
  await res.arrayBuffer();
  return res.status;
}

const ciJob = () => proxied({ authorization: "Bearer ci:42:job-token-1" });
const pat = () => proxied({ authorization: "Bearer pat:42:pat-of-alice" });
const session = () =>
  proxied({
    cookie: "_gitlab_kas=session-of-carol",
    "gitlab-agent-id": "42",
    "x-csrf-token": "csrf-of-carol",
  });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "usage-metrics-"));
  kube = await startKubeApiServer();
  const secret = new Uint8Array(randomBytes(32));
  gitlab = await GitLabApiServer.start({ secret });
  // GitLab's side: agent 42 (configuration project 7, group/project-7), the job's project
  // group/app with a CI job, and two users who are developers there. What they may do comes from
  // the configuration kas posts (ci_access and user_access name group/app).
  gitlab.addAgent("agent-42-in-gitlab", { agentId: 42, projectId: 7, agentName: "prod" });
  gitlab.addProject({ projectId: 100, path: "group/app" });
  gitlab.addJob("job-token-1", {
    jobId: 1,
    pipelineId: 2,
    projectId: 100,
    user: { id: 5, username: "ci-user" },
  });
  gitlab.addProxyUser("pat-of-alice", { id: 11, username: "alice", accessType: "personal_access_token" });
  gitlab.addMember(11, { projectId: 100 }, "developer");
  gitlab.addProxyUser("session-of-carol", {
    id: 12,
    username: "carol",
    accessType: "session_cookie",
    csrfToken: "csrf-of-carol",
  });
  gitlab.addMember(12, { projectId: 100 }, "developer");
  const configRepo = await GitRepo.init();
  const manifests = await GitRepo.init();
  repos.push(configRepo, manifests);
  await manifests.commit({
    "app.yaml": stringify({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "from-git" },
      data: { a: "1" },
    }),
  });
  await configRepo.commit({
    ".gitlab/agents/prod/config.yaml": stringify({
      ci_access: { projects: [{ id: "group/app" }] },
      user_access: { access_as: { agent: {} }, projects: [{ id: "group/app" }] },
      gitops: {
        manifest_projects: [{ id: MANIFESTS, default_namespace: "default", paths: [{ glob: "*.yaml" }] }],
      },
    }),
  });
  const tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${TOKEN}: ${JSON.stringify({
      agentId: 42,
      projectId: 7,
      agentName: "prod",
      repository: configRepo.path,
      manifest_projects: { [MANIFESTS]: manifests.path },
    })}\n`,
  );
  const secretFile = join(dir, "gitlab_secret");
  await writeFile(secretFile, Buffer.from(secret).toString("base64"));
  kas = await startInProcessKas((c) => {
    c.agent.staticTokensFile = tokensFile;
    c.gitlab.address = gitlab.url;
    c.gitlab.authenticationSecretFile = secretFile;
    c.agent.configuration.pollPeriodMs = 3_600_000;
    c.agent.gitops.pollPeriodMs = 3_600_000;
    c.observability.usageReportingPeriodMs = 100;
  });
  agent = await startInProcessAgentk({
    kasUrl: kas.addresses.agent,
    token: TOKEN,
    kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
    gitops: { pollIntervalMs: 50, backoff: { initialMs: 100, maxMs: 1000 } },
  });
  await agent.agent.client.ready(5000);
  await gitlab.waitForConfigurations(1, WAIT);
});

afterAll(async () => {
  await agent?.stop();
  await kas?.close();
  await gitlab?.close();
  await kube?.close();
  await Promise.all(repos.map((r) => r.remove()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("usage metrics reach GitLab as GitLab's kas sends them", () => {
  test("proxy requests of each kind and a commit sent to the agent, with their users and agents", async () => {
    // The manifest project's commit went to the agent (its ConfigMap is in the cluster): gitops_sync.
    await until(() => kube.store.has("configmaps", "default", "from-git"), WAIT, "the agent's first sync");
    // kas has read the agent's configuration (ci_access / user_access decide the proxy's requests).
    expect(await ciJob()).toBe(200);
    expect(await ciJob()).toBe(200);
    expect(await pat()).toBe(200);
    expect(await session()).toBe(200);
    expect(await proxied({ authorization: "Bearer pat:42:unknown" })).toBe(401); // refused: not counted

    const expected = {
      k8s_api_proxy_request: 4,
      k8s_api_proxy_requests_via_ci_access: 2,
      k8s_api_proxy_requests_via_user_access: 1,
      k8s_api_proxy_requests_via_pat_access: 1,
    };
    await usage()
      .waitFor(
        () => {
          const { gitops_sync, ...rest } = usage().counters();
          return gitops_sync !== undefined && isDeepStrictEqual(sorted(rest), sorted(expected));
        },
        WAIT,
        `GitLab to have taken ${JSON.stringify(expected)} and a gitops_sync`,
      )
      .catch((err: Error) => {
        throw new Error(`${err.message}; it has ${JSON.stringify(usage().counters())}`);
      });
    expect(usage().uniqueCounters()).toEqual({
      agent_users_using_ci_tunnel: [5, 11, 12],
      k8s_api_proxy_requests_unique_users_via_ci_access: [5],
      k8s_api_proxy_requests_unique_agents_via_ci_access: [42],
      k8s_api_proxy_requests_unique_users_via_user_access: [12],
      k8s_api_proxy_requests_unique_agents_via_user_access: [42],
      k8s_api_proxy_requests_unique_users_via_pat_access: [11],
      k8s_api_proxy_requests_unique_agents_via_pat_access: [42],
    });
    // Every post GitLab saw was taken: none refused, each with kas's JWT.
    expect(usage().attempts.every((a) => a.status === 204)).toBe(true);
    const posted = gitlab.requests.filter((r) => r.path.endsWith("/usage_metrics"));
    expect(posted.length).toBeGreaterThan(0);
    expect(posted.every((r) => r.method === "POST" && r.jwt.ok)).toBe(true);
  });

  test("GitLab failing for two reports loses nothing: the sum arrives once it takes them again", async () => {
    await settled();
    const before = usage().counters();
    const from = usage().attempts.length;
    const failedBefore = await reports("failed");
    usage().failNext(2, 500);
    expect(await Promise.all([ciJob(), ciJob(), ciJob()])).toEqual([200, 200, 200]);
    const ci = () => usage().counters().k8s_api_proxy_requests_via_ci_access ?? 0;
    await usage().waitFor(
      () => ci() === before.k8s_api_proxy_requests_via_ci_access! + 3,
      WAIT,
      "the three CI requests at GitLab",
    );
    await settled();
    const attempts = usage().attempts.slice(from);
    expect(attempts.map((a) => a.status)).toEqual([500, 500, ...attempts.slice(2).map(() => 204)]);
    // What GitLab did not take was sent again: the first report taken holds all the second failed one held.
    const failed = (attempts[1]!.body as { counters: Record<string, number> }).counters;
    expect(usage().posts.at(-(attempts.length - 2))!.counters).toMatchObject(failed);
    expect(usage().counters().k8s_api_proxy_request).toBe(before.k8s_api_proxy_request! + 3);
    expect((await reports("failed")) - failedBefore).toBe(2);
  });

  test("nothing is posted while there is nothing to report", async () => {
    await settled();
    const attempts = usage().attempts.length;
    const nothing = await reports("nothing");
    // Five more periods pass with nothing counted.
    await until(async () => (await reports("nothing")) >= nothing + 5, WAIT, "five empty periods");
    expect(usage().attempts.length).toBe(attempts);
  });
});

/** Resolves after a period found nothing to report: every count made before was taken by GitLab. */
async function settled(): Promise<void> {
  const n = await reports("nothing");
  await until(async () => (await reports("nothing")) > n, WAIT, "a period with nothing to report");
}

function sorted(o: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
}
