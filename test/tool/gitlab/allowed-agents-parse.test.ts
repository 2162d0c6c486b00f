// GitLab's allowed_agents body is input: whatever GitLab (or a proxy in between) returns is either
// read or refused as an unexpected answer, never thrown as anything else; GitLab's rendering of a
// job (the test server's, Rails' field names) reads back as the job, protected_branches_only included.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { GitLabError, parseAllowedAgentsResponse } from "../../../tool/gitlab/index.ts";
import { allowedAgentsBody, type TestJob } from "../../support/gitlab-api.ts";

const id = fc.integer({ min: 1, max: 2 ** 31 });
const jobArb: fc.Arbitrary<TestJob> = fc.record({
  jobId: id,
  pipelineId: id,
  project: fc.record({ id, path: fc.constant("group/app"), groups: fc.array(id, { maxLength: 3 }) }),
  user: fc.record({ id, username: fc.string({ minLength: 1 }) }),
  protectedRef: fc.boolean(),
  allowedAgents: fc.array(
    fc.record({
      id,
      configProjectId: id,
      configuration: fc.record(
        { protected_branches_only: fc.boolean(), default_namespace: fc.string({ minLength: 1 }) },
        { requiredKeys: [] },
      ),
    }),
    { maxLength: 4 },
  ),
});

describe("parseAllowedAgentsResponse", () => {
  test("GitLab's rendering of a job reads back: the kept entries, protected_branches_only as set", () => {
    fc.assert(
      fc.property(jobArb, (job) => {
        const parsed = parseAllowedAgentsResponse(JSON.parse(JSON.stringify(allowedAgentsBody(job))));
        // Rails keeps entries requiring a protected ref only when the ref is protected.
        const kept = job.allowedAgents.filter(
          (a) => job.protectedRef || a.configuration?.protected_branches_only !== true,
        );
        expect(parsed.allowedAgents.map((a) => a.id)).toEqual(kept.map((a) => String(a.id)));
        expect(parsed.allowedAgents.map((a) => a.configuration.protectedBranchesOnly === true)).toEqual(
          kept.map((a) => a.configuration?.protected_branches_only === true),
        );
        expect(parsed.job.id).toBe(String(job.jobId));
      }),
    );
  });

  test("anything else is read or refused as GitLab's unexpected answer, never thrown otherwise", () => {
    const body = fc.oneof(
      fc.jsonValue(),
      jobArb.chain((job) =>
        fc.jsonValue().map((junk) => {
          // A valid body with one configuration field replaced by junk.
          const b = allowedAgentsBody(job) as {
            allowed_agents: { configuration: Record<string, unknown> }[];
          };
          if (b.allowed_agents[0]) b.allowed_agents[0].configuration.protected_branches_only = junk;
          return b;
        }),
      ),
    );
    fc.assert(
      fc.property(body, (b) => {
        try {
          parseAllowedAgentsResponse(b);
        } catch (err) {
          expect(err).toBeInstanceOf(GitLabError);
          expect((err as GitLabError).kind).toBe("unavailable"); // what kas answers with 503
          expect((err as GitLabError).retryable).toBe(true);
        }
      }),
    );
  });
});
