// kas decides as GitLab answers, as GitLab's kas does: a CI job may use an agent only when GitLab's
// allowed_agents lists it, as whom that entry's access_as says; a user as authorize_proxy_user's
// access_as says. kas has no copy of the configuration to second-guess it with. A job's decision
// is made once per GitLab answer (the answer cache hands out one object while it holds it).
import type { IncomingMessage } from "node:http";
import { describe, expect, test } from "vitest";
import { decodeIdentity } from "../../../../modules/kubernetes_api/identity.ts";
import { ProxyAccessError, proxyAccess } from "../../../../modules/kubernetes_api/kas/access.ts";
import { authorizeProxyRequest } from "../../../../modules/kubernetes_api/kas/authorize.ts";
import type {
  AllowedAgentsForJob,
  CiAccessAs,
  ProxyGitLab,
  ProxyUserAuthorization,
} from "../../../../modules/kubernetes_api/kas/gitlab-answers.ts";

/** GitLab's answer for a job of project 100 (in group 55) that may use agent 42, as `accessAs` says. */
const answer = (accessAs?: CiAccessAs): AllowedAgentsForJob => ({
  allowedAgents: [{ id: "42", configProjectId: "7", configuration: accessAs ? { accessAs } : {} }],
  job: { id: "1" },
  pipeline: { id: "2" },
  project: { id: "100", groups: [{ id: "55" }] },
  user: { id: "5", username: "dev" },
  environment: { slug: "review-feature-x-bjrazc", tier: "development" },
});

const request = (authorization: string) => ({ headers: { authorization } }) as unknown as IncomingMessage;
const signal = new AbortController().signal;

function gitlabAnswering(answers: Partial<ProxyGitLab>): ProxyGitLab & { lookups: number } {
  const gl = {
    lookups: 0,
    allowedAgentsForJob: (token: string, s?: AbortSignal) => {
      gl.lookups++;
      return answers.allowedAgentsForJob?.(token, s) ?? Promise.reject(new Error("not asked"));
    },
    authorizeProxyUser: (...args: Parameters<ProxyGitLab["authorizeProxyUser"]>) => {
      gl.lookups++;
      return answers.authorizeProxyUser?.(...args) ?? Promise.reject(new Error("not asked"));
    },
  };
  return gl;
}

async function refusal(p: Promise<unknown>): Promise<ProxyAccessError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProxyAccessError);
  return err as ProxyAccessError;
}

describe("CI jobs", () => {
  test("an agent GitLab's answer does not list: 403, whatever else the answer says", async () => {
    const authorize = authorizeProxyRequest({
      gitlab: gitlabAnswering({ allowedAgentsForJob: async () => answer({ ci_job: {} }) }),
    });
    const err = await refusal(authorize(request("Bearer ci:43:job-token"), signal));
    expect(err.status).toBe(403);
    expect(err.message).toContain("GitLab does not let this job use agent 43");
    const none = authorizeProxyRequest({
      gitlab: gitlabAnswering({ allowedAgentsForJob: async () => ({ ...answer(), allowedAgents: [] }) }),
    });
    expect((await refusal(none(request("Bearer ci:42:job-token"), signal))).status).toBe(403);
  });

  test("as whom: the listed entry's access_as (none: the agent itself)", async () => {
    const decide = async (accessAs?: CiAccessAs) =>
      authorizeProxyRequest({
        gitlab: gitlabAnswering({ allowedAgentsForJob: async () => answer(accessAs) }),
      })(request("Bearer ci:42:job-token"), signal);
    expect(await decide()).toEqual(proxyAccess("42"));
    expect(await decide({ agent: {} })).toEqual(proxyAccess("42"));
    const imp = { username: "deployer", groups: ["ops"], extra: [] };
    const asDeployer = await decide({ impersonate: imp });
    expect(asDeployer.impersonate).toEqual(imp);
    expect(decodeIdentity(asDeployer.identity)).toEqual({ as: "impersonate", who: imp });
    const asJob = await decide({ ci_job: {} });
    expect(asJob.impersonate?.username).toBe("gitlab:ci_job:1");
    // The environment as GitLab names it in its answer: the slug.
    expect(asJob.impersonate?.groups).toContain("gitlab:project_env:100:review-feature-x-bjrazc");
    expect(asJob.impersonate?.groups).toContain("gitlab:group_env_tier:55:development");
    expect((await decide({ ci_user: {} })).impersonate?.username).toBe("gitlab:user:dev");
  });

  test("decided once per GitLab answer; GitLab's next answer (its copy of the configuration changed) decides anew", async () => {
    let current = answer({ ci_job: {} });
    const gitlab = gitlabAnswering({ allowedAgentsForJob: async () => current });
    const authorize = authorizeProxyRequest({ gitlab });
    const first = await authorize(request("Bearer ci:42:job-token"), signal);
    expect(first.impersonate?.username).toBe("gitlab:ci_job:1");
    expect(await authorize(request("Bearer ci:42:job-token"), signal)).toBe(first);

    current = answer({ agent: {} });
    expect(await authorize(request("Bearer ci:42:job-token"), signal)).toEqual(proxyAccess("42"));
    current = { ...answer(), allowedAgents: [] };
    expect((await refusal(authorize(request("Bearer ci:42:job-token"), signal))).status).toBe(403);
    expect(gitlab.lookups).toBe(4);
  });
});

describe("users", () => {
  const auth = (accessAs: ProxyUserAuthorization["accessAs"]): ProxyUserAuthorization => ({
    agent: { id: "42", configProjectId: "7" },
    user: { id: "11", username: "alice" },
    accessAs,
  });

  test("as whom: authorize_proxy_user's access_as; an answer for another agent: 403", async () => {
    const decide = (a: ProxyUserAuthorization, agentId = "42") =>
      authorizeProxyRequest({ gitlab: gitlabAnswering({ authorizeProxyUser: async () => a }) })(
        request(`Bearer pat:${agentId}:glpat-x`),
        signal,
      );
    expect(await decide(auth({ agent: {} }))).toEqual(proxyAccess("42"));
    const asUser = await decide(
      auth({ user: { projects: [{ id: "100", roles: ["developer"] }], groups: [] } }),
    );
    expect(asUser.impersonate?.username).toBe("gitlab:user:alice");
    expect(asUser.impersonate?.groups).toEqual(["gitlab:user", "gitlab:project_role:100:developer"]);
    expect((await refusal(decide(auth({ agent: {} }), "43"))).status).toBe(403);
  });
});
