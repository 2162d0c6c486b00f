// A CI job's access is decided once per GitLab answer and agent configuration (kas keeps the last
// decision per answer): a changed configuration must still change the decision at once.
import type { IncomingMessage } from "node:http";
import { expect, test } from "vitest";
import { decodeIdentity } from "../../../../modules/kubernetes_api/identity.ts";
import { proxyAccess } from "../../../../modules/kubernetes_api/kas/access.ts";
import { authorizeProxyRequest } from "../../../../modules/kubernetes_api/kas/authorize.ts";
import type { AllowedAgentsForJob } from "../../../../modules/kubernetes_api/kas/gitlab-answers.ts";
import { type AgentConfiguration, AgentConfigurations } from "../../../../modules/runtime/index.ts";

const job: AllowedAgentsForJob = {
  allowedAgents: [{ id: "42", configProjectId: "7", configuration: {} }],
  job: { id: "1" },
  pipeline: { id: "2" },
  project: { id: "100", path: "group/app", groups: [{ id: "55" }] },
  user: { id: "5", username: "dev" },
};

const configAs = (accessAs: Record<string, unknown>) =>
  ({
    ci_access: { projects: [{ id: "group/app", environments: [], access_as: accessAs }], groups: [] },
  }) as unknown as AgentConfiguration;

const request = { headers: { authorization: "Bearer ci:42:job-token" } } as unknown as IncomingMessage;

test("the same GitLab answer, a changed configuration: the new access_as applies on the next request", async () => {
  let config = configAs({ ci_job: {} });
  const configurations = new AgentConfigurations();
  configurations.provide(async () => config);
  let lookups = 0;
  const authorize = authorizeProxyRequest({
    configurations,
    gitlab: {
      allowedAgentsForJob: async () => {
        lookups++;
        return job; // the answer cache hands out one object while it holds it
      },
      authorizeProxyUser: () => Promise.reject(new Error("not used")),
    },
  });
  const signal = new AbortController().signal;

  const first = await authorize(request, signal);
  const second = await authorize(request, signal);
  expect(first.impersonate?.username).toBe("gitlab:ci_job:1");
  expect(second).toBe(first); // decided once for this answer and configuration

  config = configAs({ agent: {} });
  const third = await authorize(request, signal);
  expect(third).toEqual(proxyAccess("42")); // as the agent itself now: no impersonation
  expect(third.impersonate).toBeUndefined();

  config = configAs({ impersonate: { username: "deployer", groups: ["ops"], extra: [] } });
  const fourth = await authorize(request, signal);
  expect(fourth.impersonate).toEqual({ username: "deployer", groups: ["ops"], extra: [] });
  expect(decodeIdentity(fourth.identity)).toEqual({ as: "impersonate", who: fourth.impersonate });
  expect(lookups).toBe(4);
});
