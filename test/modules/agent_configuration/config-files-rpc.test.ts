// ConfigurationProject.ListAgentConfigFiles as GitLab calls it: the project's repository and its
// Gitaly in the request; kas lists .gitlab/agents/<name>/config.yaml on the default branch through
// a Gitaly test server over real git repositories. Every failure has its status.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gitlabJwt } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type TestRepo, TestStorage } from "../../support/git-repo.ts";
import { GitalyTestServer } from "../../support/gitaly-server.ts";
import { bearer, failure, gitlabServiceClients, grpcTarget, unary } from "../../support/gitlab-grpc.ts";
import { closedPort } from "../../support/ports.ts";
import { until } from "../../support/until.ts";
import { metricsOf } from "./helpers.ts";

const GITALY_TOKEN = "gitaly-secret-for-config-files-7Hq2";
const DEADLINE_LINE =
  'kas_request_duration_seconds_count{route="/gitlab.agent.configuration_project.rpc.ConfigurationProject/ListAgentConfigFiles",status="DEADLINE_EXCEEDED"} 1';
type Listing = { config_files: Array<{ name: string; agent_name: string }> };

describe("ConfigurationProject.ListAgentConfigFiles", () => {
  let storage: TestStorage;
  let repo: TestRepo;
  let gitaly: GitalyTestServer;
  let kas: InProcessKas;
  let client: grpc.Client;
  let jwt: string;
  const request = (relative_path = "group/agents.git", address = gitaly.address) => ({
    repository: {
      storage_name: "default",
      relative_path,
      gl_repository: "project-9",
      gl_project_path: "group/agents",
    },
    gitaly_info: { address, token: GITALY_TOKEN, features: {} },
  });

  beforeAll(async () => {
    storage = await TestStorage.create();
    repo = await storage.init("group/agents.git");
    await repo.commit({
      ".gitlab/agents/prod/config.yaml": "gitops: {}\n",
      ".gitlab/agents/staging/config.yaml": "observability: {}\n",
      ".gitlab/agents/staging/README.md": "not a configuration\n",
      ".gitlab/agents/nested/deeper/config.yaml": "not an agent's\n",
      "README.md": "hello\n",
    });
    // Another branch: not the default, not listed.
    await repo.commit({ ".gitlab/agents/feature/config.yaml": "{}\n" }, "feature");
    await storage.init("group/empty.git");
    gitaly = await GitalyTestServer.start({ storages: { default: storage.root }, token: GITALY_TOKEN });
    kas = await startInProcessKas();
    jwt = await gitlabJwt(kas.apiSecret, { iss: "gitlab.example.com" });
    client = new (gitlabServiceClients().ConfigurationProject)(
      grpcTarget(kas.addresses.api!),
      grpc.credentials.createInsecure(),
    );
  });
  afterAll(async () => {
    client?.close();
    await kas?.close();
    await gitaly?.close();
    await storage?.remove();
  });

  it("lists the agents' config.yaml of the default branch, nothing else", async () => {
    const { config_files } = await unary<Listing>(client, "ListAgentConfigFiles", request(), bearer(jwt));
    expect(config_files).toEqual([
      { name: ".gitlab/agents/prod/config.yaml", agent_name: "prod" },
      { name: ".gitlab/agents/staging/config.yaml", agent_name: "staging" },
    ]);
    // kas passed GitLab's Gitaly token on (Gitaly checked it).
    expect(gitaly.seen.at(-1)?.metadata.authorization).toMatch(/^Bearer v2\./);
  });

  it("an empty repository has none", async () => {
    const { config_files } = await unary<Listing>(
      client,
      "ListAgentConfigFiles",
      request("group/empty.git"),
      bearer(jwt),
    );
    expect(config_files).toEqual([]);
  });

  it("NOT_FOUND for a repository Gitaly does not have", async () => {
    const err = await failure(
      unary(client, "ListAgentConfigFiles", request("group/missing.git"), bearer(jwt)),
    );
    expect(err.code).toBe(grpc.status.NOT_FOUND);
  });

  it("UNAVAILABLE when Gitaly cannot be reached", async () => {
    const closed = await closedPort();
    const err = await failure(
      unary(client, "ListAgentConfigFiles", request(undefined, `tcp://127.0.0.1:${closed}`), bearer(jwt)),
    );
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
  });

  it("INVALID_ARGUMENT without a repository or a Gitaly address", async () => {
    for (const bad of [{ gitaly_info: request().gitaly_info }, { repository: request().repository }]) {
      const err = await failure(unary(client, "ListAgentConfigFiles", bad, bearer(jwt)));
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    }
  });

  it("DEADLINE_EXCEEDED when the call's deadline passes while Gitaly is slow", async () => {
    // A new commit: listings at a commit already read are kept by kas and would not reach Gitaly.
    await repo.commit({ "README.md": "hello again\n" });
    const release = gitaly.hold("GetTreeEntries");
    const refsBefore = gitaly.calls("GetTreeEntries");
    try {
      const err = await failure(
        unary(client, "ListAgentConfigFiles", request(), bearer(jwt), { deadline: Date.now() + 1_000 }),
      );
      expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      expect(gitaly.calls("GetTreeEntries")).toBe(refsBefore + 1);
      // kas saw the deadline too: it abandoned its Gitaly call at once and answered so, while
      // Gitaly still holds the call.
      await until(
        async () => (await metricsOf(kas.addresses.observability)).includes(DEADLINE_LINE),
        5_000,
        "kas to count the call DEADLINE_EXCEEDED",
      );
    } finally {
      release();
    }
    // Gitaly answers again: so does kas.
    const { config_files } = await unary<Listing>(client, "ListAgentConfigFiles", request(), bearer(jwt));
    expect(config_files).toHaveLength(2);
  });

  it("refuses a call without GitLab's JWT before touching Gitaly", async () => {
    const before = gitaly.seen.length;
    const err = await failure(unary(client, "ListAgentConfigFiles", request(), bearer("forged")));
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(gitaly.seen.length).toBe(before);
  });
});
