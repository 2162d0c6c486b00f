// The real kubectl through kas's Kubernetes API proxy with GitLab's credentials: a CI job's token
// (`ci:<agent id>:<job token>`, GitLab's allowed_agents), a user's personal access token
// (`pat:<agent id>:<token>`, authorize_proxy_user) and a static dev token. GitLab decides, from its
// copy of the agent's ci_access / user_access (the config.yaml kas read from a local git repository
// and posted), and kas follows its answers; the Kubernetes test server records as whom each request
// came (the Impersonate-* headers agentk passed on).
import { Agent, fetch as undiciFetch } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TOKEN } from "../../kas/support/fixtures.ts";
import type { InProcessKas } from "../../kas/support/in-process.ts";
import { environmentSlug } from "../../support/gitlab/environment-slug.ts";
import {
  ALLOWED_AGENTS_PATH,
  AUTHORIZE_PROXY_USER_PATH,
  type GitLabApiServer,
} from "../../support/gitlab-api.ts";
import type { UserInfo } from "../../support/kube/impersonation.ts";
import { type Kubectl, kubectlFor } from "../../support/kube/kubectl.ts";
import type { KubeApiServer } from "../../support/kube-apiserver.ts";
import { type KubeProxySetup, startKubeProxySetup } from "../../support/kube-proxy-setup.ts";
import { writeKubeconfig } from "../../support/kubeconfig.ts";
import { testPki } from "../../support/tls-certs.ts";

const GITLAB_URL = "https://gitlab.example.com";
// GitLab's namespaces: group "group" (55) holds agent 42's configuration project (7, group/project-7)
// and the jobs' projects; "group/deploy" (77) is a subgroup; "other-root" is another root group.
const PROJECTS = {
  app: { projectId: 100, path: "group/app" },
  deployOther: { projectId: 101, path: "group/deploy/other" },
  prodOnly: { projectId: 102, path: "group/prod-only" },
  elsewhere: { projectId: 103, path: "group/elsewhere" },
  release: { projectId: 104, path: "group/release" },
  foreign: { projectId: 105, path: "other-root/app" },
  reviewApps: { projectId: 106, path: "group/review-apps" },
};
const CONFIG = {
  ci_access: {
    projects: [
      { id: "group/app", access_as: { ci_job: {} } },
      { id: "group/prod-only", environments: ["production", "review/*"] },
      { id: "group/release", protected_branches_only: true, access_as: { ci_job: {} } },
      { id: "group/review-apps", environments: ["review/*"], access_as: { ci_job: {} } },
      // Outside the agent's root group: GitLab ignores it (as Rails does).
      { id: "other-root/app" },
    ],
    groups: [
      {
        id: "group/deploy",
        access_as: {
          impersonate: {
            username: "deployer",
            groups: ["deployers"],
            extra: [{ key: "example.com/team", val: ["blue", "green"] }],
          },
        },
      },
    ],
  },
  user_access: { access_as: { user: {} }, projects: [{ id: "group/app" }], groups: [{ id: "group" }] },
};

let setup: KubeProxySetup;
let kube: KubeApiServer;
let gitlab: GitLabApiServer;
let kas: InProcessKas;
const kubectls: Kubectl[] = [];

async function kubectlWith(token: string): Promise<Kubectl> {
  const pki = await testPki();
  const k = await kubectlFor({
    writeKubeconfig: (path) =>
      writeKubeconfig(path, {
        server: kas.addresses.kubernetesApi,
        caCert: pki.caCert,
        token,
        namespace: "default",
      }),
  });
  kubectls.push(k);
  return k;
}

/** A CI job of `project` (one of PROJECTS), maybe deploying to `environment`, on a protected ref or not; its kubectl token for agent 42. */
function job(jobId: number, project: { projectId: number }, environment?: string, protectedRef = false) {
  gitlab.addJob(`job-token-${jobId}`, {
    jobId,
    pipelineId: jobId + 1000,
    projectId: project.projectId,
    user: { id: 5, username: "ci-runner-user" },
    ...(environment && { environment: { name: environment, tier: "production" } }),
    protectedRef,
  });
  return `ci:42:job-token-${jobId}`;
}

const fromKubectl = () => kube.requests.filter((r) => r.headers["user-agent"]?.startsWith("kubectl"));

async function whoami(k: Kubectl): Promise<UserInfo> {
  const r = await k.run(["auth", "whoami", "-o", "json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout).status.userInfo;
}

beforeAll(async () => {
  setup = await startKubeProxySetup(
    CONFIG,
    (c) => {
      c.gitlab.externalUrl = GITLAB_URL;
      c.gitlab.retryDeadlineMs = 500;
    },
    {
      seed: (gl) => {
        gl.addGroup({ id: 55, path: "group" });
        gl.addGroup({ id: 77, path: "group/deploy" });
        for (const project of Object.values(PROJECTS)) gl.addProject(project);
        // alice: Developer of group/app; carol: Maintainer of the whole group.
        gl.addProxyUser("pat-alice", { id: 11, username: "alice", accessType: "personal_access_token" });
        gl.addMember(11, { projectId: 100 }, "developer");
        gl.addProxyUser("session-of-carol", {
          id: 12,
          username: "carol",
          accessType: "session_cookie",
          csrfToken: "csrf-of-carol",
        });
        gl.addMember(12, { groupId: 55 }, "maintainer");
      },
    },
  );
  ({ kube, gitlab, kas } = setup);
  kube.store.create("pods", "default", {
    metadata: { name: "web" },
    spec: { containers: [{ name: "main", image: "busybox" }] },
    status: { phase: "Running" },
  });
});
afterAll(async () => {
  await Promise.all(kubectls.map((k) => k.close()));
  await setup?.close();
});

/** kubectl with `token` is refused with 403 because GitLab's allowed_agents does not list agent 42. */
async function refusedByGitLab(token: string): Promise<void> {
  const r = await (await kubectlWith(token)).run(["get", "pods", "-v=8"]);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/Response Status: 403 Forbidden/);
  expect(r.stderr).toContain("GitLab does not let this job use agent 42");
}

describe("CI jobs through kas (ci:<agent id>:<job token>)", () => {
  test("access_as ci_job: kubectl works as gitlab:ci_job:<id>, with GitLab's groups and extras; credentials stay at kas", async () => {
    const k = await kubectlWith(job(501, PROJECTS.app));
    const before = fromKubectl().length;
    const pods = await k.run(["get", "pods"]);
    expect(pods.code, pods.stderr).toBe(0);
    expect(pods.stdout).toMatch(/^web\s/m);
    const seen = fromKubectl().slice(before);
    expect(seen.length).toBeGreaterThan(0);
    for (const r of seen) {
      expect(r.impersonation).toEqual({
        username: "gitlab:ci_job:501",
        groups: ["gitlab:ci_job", "gitlab:group:55", "gitlab:project:100"],
        extra: {
          "agent.gitlab.com/id": ["42"],
          "agent.gitlab.com/config_project_id": ["7"],
          "agent.gitlab.com/project_id": ["100"],
          "agent.gitlab.com/ci_pipeline_id": ["1501"],
          "agent.gitlab.com/ci_job_id": ["501"],
          "agent.gitlab.com/username": ["ci-runner-user"],
        },
      });
      // agentk's own credentials authenticate; the job token never reaches the cluster.
      expect(r.headers.authorization).toBe(`Bearer ${kube.token}`);
    }
    expect((await whoami(k)).username).toBe("gitlab:ci_job:501");
  });

  test("exec and logs -f as the CI job", async () => {
    const k = await kubectlWith(job(502, PROJECTS.app));
    const exec = await k.run(["exec", "web", "--", "echo", "as", "the", "job"]);
    expect(exec, exec.stderr).toMatchObject({ code: 0, stdout: "as the job\n" });
    const upgrade = kube.requests.findLast((r) => r.path.includes("/pods/web/exec"));
    expect(upgrade?.impersonation?.username).toBe("gitlab:ci_job:502");

    kube.appendLog("default", "web", "first");
    const logs = k.start(["logs", "-f", "web"]);
    try {
      await logs.line("first");
      kube.appendLog("default", "web", "second");
      await logs.line("second");
    } finally {
      await logs.stop();
    }
    const follow = kube.requests.findLast((r) => r.path.includes("/pods/web/log"));
    expect(follow?.impersonation?.username).toBe("gitlab:ci_job:502");
  });

  test("a group's entry with access_as impersonate: the configured identity, extras as repeated values", async () => {
    const k = await kubectlWith(job(503, PROJECTS.deployOther));
    expect(await whoami(k)).toEqual({
      username: "deployer",
      groups: ["deployers"],
      extra: { "example.com/team": ["blue", "green"] },
    });
  });

  test("an entry without access_as: the agent's own identity (no impersonation); the job's --as is refused only when kas impersonates", async () => {
    const k = await kubectlWith(job(504, PROJECTS.prodOnly, "review/feature-1"));
    const before = fromKubectl().length;
    expect((await k.run(["get", "pods"])).code).toBe(0);
    for (const r of fromKubectl().slice(before)) expect(r.impersonation).toBeUndefined();
    // No impersonation by kas: the caller's own Impersonate-* is dropped, not passed on.
    expect((await whoami(await kubectlWith(job(505, PROJECTS.prodOnly, "production")))).username).toBe(
      "system:serviceaccount:gitlab-agent:agentk",
    );
    const asAdmin = await k.run(["get", "pods", "--as=admin"]);
    expect(asAdmin.code, asAdmin.stderr).toBe(0);
    expect(fromKubectl().at(-1)?.impersonation).toBeUndefined();

    const impersonating = await kubectlWith(job(506, PROJECTS.app));
    const refused = await impersonating.run(["get", "pods", "--as=admin", "-v=8"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Response Status: 403 Forbidden/);
    expect(refused.stderr).toContain("may not set impersonate-user");
  });

  test("environments: GitLab matches the environment's name (review/Feature-1 against review/*); the identity names the environment by the slug GitLab answers", async () => {
    const name = "review/Feature-1";
    const slug = environmentSlug(name);
    expect(slug).not.toBe(name); // GitLab's answer has no name to match the configuration with
    const who = await whoami(await kubectlWith(job(540, PROJECTS.reviewApps, name)));
    expect(who.username).toBe("gitlab:ci_job:540");
    expect(who.groups).toContain(`gitlab:project_env:106:${slug}`);
    expect(who.extra["agent.gitlab.com/environment_slug"]).toEqual([slug]);
    await refusedByGitLab(job(541, PROJECTS.reviewApps, "production"));
    await refusedByGitLab(job(542, PROJECTS.reviewApps));
  });

  test("refused by GitLab's allowed_agents: a project ci_access does not list, an environment it does not allow, a project outside the agent's root group (listed in the configuration, ignored by GitLab); an unknown token", async () => {
    const before = fromKubectl().length;
    await refusedByGitLab(job(510, PROJECTS.elsewhere));
    await refusedByGitLab(job(511, PROJECTS.prodOnly, "staging"));
    await refusedByGitLab(job(512, PROJECTS.foreign));

    const unknown = await (await kubectlWith("ci:42:no-such-job")).run(["get", "pods"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("You must be logged in to the server");
    expect(fromKubectl().length).toBe(before);
  });

  test("protected_branches_only, as GitLab applies it: a job whose pipeline ref is protected may use the agent, one whose ref is not is refused (403, a Kubernetes Status); kas follows GitLab's copy of the configuration", async () => {
    const onTag = await kubectlWith(job(530, PROJECTS.release, undefined, true));
    const pods = await onTag.run(["get", "pods"]);
    expect(pods.code, pods.stderr).toBe(0);
    expect(pods.stdout).toMatch(/^web\s/m);
    expect((await whoami(onTag)).username).toBe("gitlab:ci_job:530");

    const before = fromKubectl().length;
    // GitLab leaves the entry out for an unprotected ref: the agent is not among the allowed.
    const onBranch = job(531, PROJECTS.release);
    await refusedByGitLab(onBranch);
    const pki = await testPki();
    const dispatcher = new Agent({ connect: { ca: pki.caCert } });
    try {
      const res = await undiciFetch(`${kas.addresses.kubernetesApi}/api/v1/namespaces/default/pods`, {
        dispatcher,
        headers: { authorization: `Bearer ${onBranch}` },
      });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({
        kind: "Status",
        status: "Failure",
        reason: "Forbidden",
        code: 403,
        message: expect.stringContaining("GitLab does not let this job use agent 42"),
      });
    } finally {
      await dispatcher.close();
    }
    expect(fromKubectl().length).toBe(before);

    // GitLab's copy without the flag (as GitLab holds it after a post of a commit without it): GitLab
    // lets the job of an unprotected ref use the agent, and kas does as GitLab says.
    const posted = gitlab.postedConfigurations.at(-1)!.agentConfig;
    const without = structuredClone(posted) as { ci_access: { projects: Record<string, unknown>[] } };
    for (const entry of without.ci_access.projects) delete entry.protected_branches_only;
    gitlab.takeConfiguration(42, without);
    try {
      expect((await whoami(await kubectlWith(job(532, PROJECTS.release)))).username).toBe(
        "gitlab:ci_job:532",
      );
    } finally {
      gitlab.takeConfiguration(42, posted);
    }
  });

  test("GitLab's answer is cached: one allowed_agents call per job token, however many requests; GitLab down -> 503", async () => {
    const k = await kubectlWith(job(520, PROJECTS.app));
    const calls = () =>
      gitlab.requests.filter((r) => r.path === ALLOWED_AGENTS_PATH && r.jobToken === "job-token-520").length;
    const runs = await Promise.all([1, 2, 3, 4].map(() => k.run(["get", "pods"])));
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    expect(calls(), JSON.stringify(gitlab.requests.slice(-3))).toBe(1);

    const down = await kubectlWith(job(521, PROJECTS.app));
    // Enough for every attempt of every request kubectl makes; the rest is forgotten after.
    gitlab.failNext(...Array.from({ length: 500 }, () => ({ status: 502 })));
    const r = await down.run(["get", "pods", "-v=8"]);
    gitlab.clearFaults();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Response Status: 503 Service Unavailable/);
    expect(r.stderr).toContain("GitLab answered HTTP 502");
  });
});

describe("users through kas", () => {
  test("a personal access token (pat:<agent id>:<token>): user_access as user -> gitlab:user:<name> with the roles GitLab derives from the user's membership", async () => {
    const alice = await kubectlWith("pat:42:pat-alice");
    expect(await whoami(alice)).toEqual({
      username: "gitlab:user:alice",
      // A Developer of group/app (listed in user_access): every role up to developer; no group role.
      groups: [
        "gitlab:user",
        "gitlab:project_role:100:guest",
        "gitlab:project_role:100:reporter",
        "gitlab:project_role:100:developer",
      ],
      extra: {
        "agent.gitlab.com/id": ["42"],
        "agent.gitlab.com/username": ["alice"],
        "agent.gitlab.com/access_type": ["personal_access_token"],
        "agent.gitlab.com/config_project_id": ["7"],
      },
    });
    const authorize = gitlab.requests.findLast((r) => r.path.endsWith("/authorize_proxy_user"));
    expect(authorize?.jwt.ok).toBe(true);
    expect(authorize?.body).toEqual({
      agent_id: 42,
      access_type: "personal_access_token",
      access_key: "pat-alice",
    });

    // A token GitLab finds no user for: GitLab's 400 ("Unable to get user from request data") is 401.
    const stranger = await (await kubectlWith("pat:42:pat-unknown")).run(["get", "pods", "-v=8"]);
    expect(stranger.code).toBe(1);
    expect(stranger.stderr).toMatch(/Response Status: 401 Unauthorized/);
    expect(stranger.stderr).toContain("You must be logged in to the server");
    expect(gitlab.requests.findLast((r) => r.path === AUTHORIZE_PROXY_USER_PATH)?.status).toBe(400);
  });

  test("the web UI's session: _gitlab_kas cookie, Gitlab-Agent-Id, X-Csrf-Token; CORS for GitLab's origin only", async () => {
    const pki = await testPki();
    const dispatcher = new Agent({ connect: { ca: pki.caCert } });
    const url = `${kas.addresses.kubernetesApi}/apis/authentication.k8s.io/v1/selfsubjectreviews`;
    const session = {
      cookie: `_gitlab_kas=${encodeURIComponent("session-of-carol")}; other=1`,
      "gitlab-agent-id": "42",
      "x-csrf-token": "csrf-of-carol",
      "content-type": "application/json",
    };
    const body = JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" });
    try {
      const res = await undiciFetch(url, {
        method: "POST",
        dispatcher,
        headers: { ...session, origin: GITLAB_URL },
        body,
      });
      expect(res.status).toBe(201);
      expect(res.headers.get("access-control-allow-origin")).toBe(GITLAB_URL);
      expect(res.headers.get("access-control-allow-credentials")).toBe("true");
      const review = (await res.json()) as { status: { userInfo: UserInfo } };
      expect(review.status.userInfo.username).toBe("gitlab:user:carol");
      // A Maintainer of group (listed in user_access), so of group/app too (also listed).
      const upToMaintainer = ["guest", "reporter", "developer", "maintainer"];
      expect(review.status.userInfo.groups).toEqual([
        "gitlab:user",
        ...upToMaintainer.map((r) => `gitlab:project_role:100:${r}`),
        ...upToMaintainer.map((r) => `gitlab:group_role:55:${r}`),
      ]);
      const seen = kube.requests.at(-1)!;
      expect(seen.headers.cookie).toBeUndefined();
      expect(seen.headers["gitlab-agent-id"]).toBeUndefined();
      expect(seen.headers["x-csrf-token"]).toBeUndefined();

      const wrongCsrf = await undiciFetch(url, {
        method: "POST",
        dispatcher,
        headers: { ...session, "x-csrf-token": "forged" },
        body,
      });
      expect(wrongCsrf.status).toBe(401);
      expect(wrongCsrf.headers.get("gitlab-unauthorized")).toBe("true");
      expect(await wrongCsrf.json()).toMatchObject({ kind: "Status", reason: "Unauthorized", code: 401 });

      const foreign = await undiciFetch(url, {
        method: "POST",
        dispatcher,
        headers: { ...session, origin: "https://evil.example" },
        body,
      });
      expect(foreign.status).toBe(403);
      expect(foreign.headers.get("access-control-allow-origin")).toBeNull();

      const preflight = await undiciFetch(url, {
        method: "OPTIONS",
        dispatcher,
        headers: { origin: GITLAB_URL, "access-control-request-headers": "gitlab-agent-id,x-csrf-token" },
      });
      expect(preflight.status).toBe(200);
      expect(preflight.headers.get("access-control-allow-headers")).toBe("gitlab-agent-id,x-csrf-token");
    } finally {
      await dispatcher.close();
    }
  });
});

describe("static dev tokens keep working", () => {
  test("the agent's own identity; the caller's --as is dropped", async () => {
    const dev = await kubectlWith(TOKEN);
    expect((await whoami(dev)).username).toBe("system:serviceaccount:gitlab-agent:agentk");
    const r = await dev.run(["get", "pods", "--as=admin", "--as-group=system:masters"]);
    expect(r.code, r.stderr).toBe(0);
    expect(fromKubectl().at(-1)?.impersonation).toBeUndefined();
  });
});
