// GitLab's allowed_agents body is input: whatever GitLab (or a proxy in between) returns is either
// read or refused as an unexpected answer, never thrown as anything else; GitLab's rendering of an
// answer (the test server's, Rails' field names) reads back as the answer, the matched entries'
// access_as included. (Which entries GitLab keeps is the test server's model's to say: test/support/gitlab.)
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { GitLabError, parseAllowedAgentsResponse } from "../../../tool/gitlab/index.ts";
import { type AllowedAgentsAnswer, allowedAgentsBody } from "../../support/gitlab-api.ts";

const id = fc.integer({ min: 1, max: 2 ** 31 });
const path = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}(\/[a-z][a-z0-9-]{0,8}){0,2}$/);
const answerArb: fc.Arbitrary<AllowedAgentsAnswer> = fc.record(
  {
    job: fc.record({ id }),
    pipeline: fc.record({ id }),
    project: fc.record({ id, groups: fc.array(id, { maxLength: 3 }) }),
    user: fc.record({
      id,
      username: fc.string({ minLength: 1 }),
      roles: fc.subarray(["guest", "reporter", "developer"]),
    }),
    environment: fc.record({ slug: fc.string({ minLength: 1 }), tier: fc.string() }),
    authorizations: fc.array(
      fc.record({
        agentId: id,
        configProject: fc.record({ id, path }),
        config: fc.record(
          {
            // Stored with the entry; Rails has applied it already, so kas does not read it.
            protected_branches_only: fc.boolean(),
            default_namespace: fc.string({ minLength: 1 }),
            access_as: fc.constantFrom(
              { agent: {} },
              { ci_job: {} },
              { ci_user: {} },
              { impersonate: { username: "deployer", groups: ["ops"], extra: [{ key: "k", val: ["v"] }] } },
            ),
          },
          { requiredKeys: [] },
        ),
      }),
      { maxLength: 4 },
    ),
  },
  { requiredKeys: ["job", "pipeline", "project", "user", "authorizations"] },
);

describe("parseAllowedAgentsResponse", () => {
  test("GitLab's rendering of an answer reads back: the agents, their entries' access_as, the job", () => {
    fc.assert(
      fc.property(answerArb, (answer) => {
        const parsed = parseAllowedAgentsResponse(JSON.parse(JSON.stringify(allowedAgentsBody(answer))));
        expect(parsed.allowedAgents.map((a) => [a.id, a.configProjectId])).toEqual(
          answer.authorizations.map((a) => [String(a.agentId), String(a.configProject.id)]),
        );
        expect(parsed.allowedAgents.map((a) => a.configuration.accessAs)).toEqual(
          answer.authorizations.map((a) => a.config.access_as),
        );
        expect(parsed.allowedAgents.map((a) => a.configuration.defaultNamespace)).toEqual(
          answer.authorizations.map((a) => a.config.default_namespace),
        );
        expect(parsed.job.id).toBe(String(answer.job.id));
        expect(parsed.pipeline.id).toBe(String(answer.pipeline.id));
        expect(parsed.project.groups.map((g) => g.id)).toEqual(answer.project.groups.map((g) => String(g)));
        expect(parsed.environment).toEqual(answer.environment);
      }),
    );
  });

  test("anything else is read or refused as GitLab's unexpected answer, never thrown otherwise", () => {
    const body = fc.oneof(
      fc.jsonValue(),
      answerArb.chain((answer) =>
        fc.jsonValue().map((junk) => {
          // A valid body with one configuration field replaced by junk.
          const b = allowedAgentsBody(answer) as {
            allowed_agents: { configuration: Record<string, unknown> }[];
          };
          if (b.allowed_agents[0]) b.allowed_agents[0].configuration.access_as = junk;
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
