// agent_configuration on its own, against the GitLab API test server: the wire as GitLab's kas sends
// it (POST, kas's JWT living 30 s, User-Agent gitlab-kas/<version>/<commit>, protojson body with a
// string int64), GitLab's 204, its 404 for a deleted agent, a 500 retried; and the test server
// refusing what Rails' Grape would (400).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  AGENT_CONFIGURATION_PATH,
  GitLabClient,
  GitLabError,
  postAgentConfiguration,
  signKasApiJwt,
} from "../../../tool/gitlab/index.ts";
import { kasUserAgent } from "../../../tool/version.ts";
import * as wire from "../../support/gitlab-api.ts";

const CONFIG = { ci_access: { projects: [{ id: "group/app" }] }, user_access: { access_as: { agent: {} } } };
let secret: Uint8Array;
let gitlab: wire.GitLabApiServer;
let client: GitLabClient;

beforeAll(async () => {
  secret = new Uint8Array(randomBytes(32));
  gitlab = await wire.GitLabApiServer.start({
    secret,
    agents: { "glagent-any": { agentId: 42, projectId: 7, agentName: "prod" } },
  });
  client = new GitLabClient({ gitlabUrl: gitlab.url, secret, maxAttempts: 2, backoff: { initialMs: 5 } });
});
afterAll(async () => {
  await client?.close();
  await gitlab?.close();
});

describe("postAgentConfiguration", () => {
  test("posts {agent_id, agent_config} with kas's JWT and User-Agent; GitLab answers 204", async () => {
    await postAgentConfiguration(client, "42", CONFIG);
    const [request] = gitlab.configurationPosts.slice(-1);
    expect(request).toMatchObject({ method: "POST", path: AGENT_CONFIGURATION_PATH, status: 204 });
    // protojson writes an int64 as a decimal string.
    expect(request!.body).toEqual({ agent_id: "42", agent_config: CONFIG });
    expect(gitlab.postedConfigurations.at(-1)).toEqual({ agentId: 42, agentConfig: CONFIG });
    // GitLab's kas: `kasServerName()` = gitlab-kas/<version>/<commit>.
    expect(request!.userAgent).toBe(kasUserAgent());
    expect(request!.userAgent).toMatch(/^gitlab-kas\/[^/]+\/[^/]+$/);
    expect(request!.userAgent).toMatch(/^gitlab-kas\/[^/]+\/[^/]+$/);
  });

  test("kas's JWT lives 30 s from iat, as GitLab's kas signs it, nbf 5 s before", async () => {
    await postAgentConfiguration(client, "42", CONFIG);
    const { jwt } = gitlab.configurationPosts.at(-1)!;
    expect(jwt.ok).toBe(true);
    const claims = (jwt as { claims: Record<string, number> }).claims;
    expect(claims.exp! - claims.iat!).toBe(30);
    expect(claims.iat! - claims.nbf!).toBe(5);
    expect(claims).toMatchObject({ iss: "gitlab-kas", aud: "gitlab" });
  });

  test("a 500 is retried; the next answer, 204, is the result", async () => {
    const before = gitlab.configurationPosts.length;
    gitlab.failNextConfigurationPosts(500);
    await postAgentConfiguration(client, "42", CONFIG);
    expect(gitlab.configurationPosts.slice(before).map((r) => r.status)).toEqual([500, 204]);
  });

  test("an agent GitLab does not know: not_found", async () => {
    const err = await postAgentConfiguration(client, "4242", CONFIG).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitLabError);
    expect((err as GitLabError).kind).toBe("not_found");
  });

  test("an agent id that is not GitLab's is not sent", async () => {
    const before = gitlab.configurationPosts.length;
    await expect(postAgentConfiguration(client, "static-agent", CONFIG)).rejects.toThrow(RangeError);
    expect(gitlab.configurationPosts.length).toBe(before);
  });
});

describe("the GitLab test server's agent_configuration", () => {
  const post = async (body: string, jwt?: string) =>
    fetch(`${gitlab.url}${AGENT_CONFIGURATION_PATH}`, {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "gitlab-kas-api-request": jwt ?? (await signKasApiJwt(secret)),
      },
    });

  test.each([
    ["not JSON", "{agent_id"],
    ["no agent_id", JSON.stringify({ agent_config: CONFIG })],
    ["agent_id not an integer", JSON.stringify({ agent_id: "forty-two", agent_config: CONFIG })],
    ["no agent_config", JSON.stringify({ agent_id: 42 })],
    ["agent_config not an object", JSON.stringify({ agent_id: 42, agent_config: "yes" })],
  ])("refuses a malformed body (%s) with 400, as Rails does, and records nothing taken", async (_, body) => {
    const taken = gitlab.postedConfigurations.length;
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(gitlab.postedConfigurations.length).toBe(taken);
  });

  test("refuses a request without kas's JWT (401)", async () => {
    const res = await post(JSON.stringify({ agent_id: 42, agent_config: CONFIG }), "not-a-jwt");
    expect(res.status).toBe(401);
  });

  test("takes an integer agent_id too (Grape coerces both)", async () => {
    const res = await post(JSON.stringify({ agent_id: 42, agent_config: CONFIG }));
    expect(res.status).toBe(204);
    expect(gitlab.postedConfigurations.at(-1)).toEqual({ agentId: 42, agentConfig: CONFIG });
  });
});
