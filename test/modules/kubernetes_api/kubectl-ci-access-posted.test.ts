// A CI job's kubectl through kas works only because kas told GitLab the agent's configuration:
// GitLab's allowed_agents answers from the ci_access kas posted (agent_configuration), so a job
// of group/app is refused while the posted config.yaml does not list the project, allowed once a
// commit lists it and kas posted that, as whom the posted entry's access_as says, and refused again
// once a commit removes it and kas posted that. Each step waits for kas's post (the GitLab test server's record), not for time.

import { afterAll, beforeAll, expect, test } from "vitest";
import { stringify } from "yaml";
import type { GitLabApiServer } from "../../support/gitlab-api.ts";
import type { UserInfo } from "../../support/kube/impersonation.ts";
import { type Kubectl, kubectlFor } from "../../support/kube/kubectl.ts";
import { type KubeProxySetup, startKubeProxySetup } from "../../support/kube-proxy-setup.ts";
import { writeKubeconfig } from "../../support/kubeconfig.ts";
import { pushTo } from "../agent_configuration/helpers.ts";

const CONFIG_PATH = ".gitlab/agents/prod/config.yaml";
const APP = { projectId: 100, path: "group/app" };
const OTHER = { projectId: 101, path: "group/other" };
const configListing = (...projects: string[]) => ({
  ci_access: { projects: projects.map((id) => ({ id, access_as: { ci_job: {} } })) },
});
const whoamiOf = async (k: Kubectl): Promise<UserInfo> => {
  const r = await k.run(["auth", "whoami", "-o", "json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout).status.userInfo;
};

let setup: KubeProxySetup;
let gitlab: GitLabApiServer;
const kubectls: Kubectl[] = [];

/** kubectl with the token of a new CI job of group/app, for agent 42. */
async function appJob(jobId: number): Promise<Kubectl> {
  gitlab.addJob(`job-token-${jobId}`, {
    jobId,
    pipelineId: jobId + 1000,
    projectId: APP.projectId,
    user: { id: 5, username: "ci-runner-user" },
  });
  const k = await kubectlFor({
    writeKubeconfig: (path) =>
      writeKubeconfig(path, {
        server: setup.kas.addresses.kubernetesApi,
        caCert: setup.caCert,
        token: `ci:42:job-token-${jobId}`,
        namespace: "default",
      }),
  });
  kubectls.push(k);
  return k;
}

/** Commits `config` as agent 42's config.yaml, tells kas of the push, and waits for kas's post of it. */
async function commitAndWaitForPost(config: Record<string, unknown>) {
  const posts = gitlab.postedConfigurations.length;
  await setup.repo.commit({ [CONFIG_PATH]: stringify(config) });
  expect(await pushTo(setup.kas, { id: 7 })).toBe(204);
  return (await gitlab.waitForConfigurations(posts + 1)).agentConfig;
}

async function expectRefusedByGitLab(k: Kubectl) {
  const r = await k.run(["get", "pods", "-v=8"]);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/Response Status: 403 Forbidden/);
  expect(r.stderr).toContain("GitLab does not let this job use agent 42");
}

beforeAll(async () => {
  setup = await startKubeProxySetup(configListing(OTHER.path), undefined, {
    seed: (gl) => {
      gl.addGroup({ id: 55, path: "group" });
      gl.addProject(APP);
      gl.addProject(OTHER);
    },
  });
  gitlab = setup.gitlab;
  setup.kube.store.create("pods", "default", {
    metadata: { name: "web" },
    spec: { containers: [{ name: "main", image: "busybox" }] },
    status: { phase: "Running" },
  });
});
afterAll(async () => {
  await Promise.all(kubectls.map((k) => k.close()));
  await setup?.close();
});

test("GitLab lets a CI job use the agent only once kas posted a configuration whose ci_access lists the job's project, and no longer after kas posted one without it", async () => {
  // kas posted the first configuration (startKubeProxySetup waits for it): group/other only.
  expect(gitlab.postedConfigurations).toEqual([{ agentId: 42, agentConfig: expect.any(Object) }]);
  await expectRefusedByGitLab(await appJob(601));

  const listing = await commitAndWaitForPost(configListing(OTHER.path, APP.path));
  expect(listing).toMatchObject({ ci_access: { projects: [{ id: OTHER.path }, { id: APP.path }] } });
  const allowed = await appJob(602);
  const pods = await allowed.run(["get", "pods"]);
  expect(pods.code, pods.stderr).toBe(0);
  expect(pods.stdout).toMatch(/^web\s/m);
  expect((await whoamiOf(allowed)).username).toBe("gitlab:ci_job:602");

  // The entry's access_as as GitLab holds it from kas's post, in GitLab's answer, decides as whom.
  await commitAndWaitForPost({
    ci_access: { projects: [{ id: APP.path, access_as: { impersonate: { username: "deployer" } } }] },
  });
  expect((await whoamiOf(await appJob(604))).username).toBe("deployer");

  const removed = await commitAndWaitForPost(configListing(OTHER.path));
  expect(removed).toMatchObject({ ci_access: { projects: [{ id: OTHER.path }] } });
  await expectRefusedByGitLab(await appJob(603));
});
