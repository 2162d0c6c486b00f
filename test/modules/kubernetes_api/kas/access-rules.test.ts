// The agent's ci_access as kas applies it to a CI job GitLab allowed: which entry, and so as whom;
// protected_branches_only against what GitLab's answer shows of the pipeline's ref.
import { describe, expect, test } from "vitest";
import { parseAgentConfiguration } from "../../../../modules/agentcfg/index.ts";
import { ProxyAccessError } from "../../../../modules/kubernetes_api/kas/access.ts";
import {
  ciAuthorization,
  pipelineRefProtected,
} from "../../../../modules/kubernetes_api/kas/access-rules.ts";
import type { AllowedAgentsForJob } from "../../../../modules/kubernetes_api/kas/gitlab-answers.ts";

const config = parseAgentConfiguration(`
ci_access:
  projects:
    - id: group/release
      protected_branches_only: true
      access_as: {ci_job: {}}
  groups:
    - id: group
      access_as: {impersonate: {username: branch-deployer}}
`);

/** A job of group/release (in group "group"), with GitLab's kept entries for agent 42. */
function job(
  configurations: AllowedAgentsForJob["allowedAgents"][number]["configuration"][],
): AllowedAgentsForJob {
  return {
    allowedAgents: configurations.map((configuration) => ({ id: "42", configProjectId: "7", configuration })),
    job: { id: "1" },
    pipeline: { id: "2" },
    project: { id: "100", path: "group/release", groups: [{ id: "55", path: "group" }] },
    user: { id: "5", username: "u" },
  };
}

function refusal(fn: () => unknown): ProxyAccessError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProxyAccessError);
    return err as ProxyAccessError;
  }
  throw new Error("not refused");
}

describe("protected_branches_only", () => {
  test("a kept entry with the flag shows the ref is protected (GitLab drops such entries otherwise)", () => {
    expect(pipelineRefProtected(job([{ protectedBranchesOnly: true }]))).toBe(true);
    expect(pipelineRefProtected(job([{}]))).toBe(false);
    expect(pipelineRefProtected(job([]))).toBe(false);
  });

  test("protected ref: the project's entry; unprotected: the next entry that allows any ref (the group's)", () => {
    expect(ciAuthorization("42", config, job([{ protectedBranchesOnly: true }, {}])).accessAs).toEqual({
      ci_job: {},
    });
    expect(ciAuthorization("42", config, job([{}])).accessAs).toEqual({
      impersonate: { username: "branch-deployer", groups: [], extra: [] },
    });
  });

  test("no entry allows an unprotected ref: 403 naming protected_branches_only", () => {
    const only = parseAgentConfiguration(`
ci_access:
  projects:
    - id: group/release
      protected_branches_only: true
`);
    const err = refusal(() => ciAuthorization("42", only, job([{}])));
    expect(err.status).toBe(403);
    expect(err.message).toContain("only for jobs on protected branches or tags (protected_branches_only)");
    expect(ciAuthorization("42", only, job([{ protectedBranchesOnly: true }])).accessAs).toEqual({
      agent: {},
    });
  });
});
