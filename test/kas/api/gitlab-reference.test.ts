// kas against GitLab's own wire contract: a client built from GitLab v16.5's .proto files
// (test/support/gitlab-protos) calls two clustered kas replicas, one of which holds the tunnel of a
// real agentk whose cluster is the Kubernetes API test server. GitLab of that version calls
// GetConnectedAgents (not the By... methods) and reads agent_meta's kubernetes_version and
// commit_id; ListAgentConfigFiles names the branch in default_branch.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commitId, VERSION } from "../../../tool/version.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { type TestRepo, TestStorage } from "../../support/git-repo.ts";
import { GitalyTestServer } from "../../support/gitaly-server.ts";
import { bearer, failure, gitlabServiceClients, grpcTarget, unary } from "../../support/gitlab-grpc.ts";
import { gitlabReferenceClients } from "../../support/gitlab-reference-grpc.ts";
import { VERSION as KUBE_VERSION } from "../../support/kube/discovery.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";
import { AGENT_ID, gitlabJwt, TOKEN } from "../support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../support/in-process.ts";

/** GitLab's ConnectedAgentInfo as its stubs read it (proto field names, int64 as decimal). */
interface Info {
  agent_id: string;
  project_id: string;
  connection_id: string;
  agent_meta: {
    version: string;
    commit_id: string;
    pod_namespace: string;
    pod_name: string;
    kubernetes_version: { major: string; minor: string; git_version: string; platform: string } | null;
  } | null;
}
type Agents = { agents: Info[] };
type Listing = { config_files: Array<{ name: string; agent_name: string }> };

const reference = gitlabReferenceClients();
const insecure = grpc.credentials.createInsecure();
const GITALY_TOKEN = "gitaly-secret-for-reference-protos-9Lk";
const DEADLINE_MS = 10_000;

describe("GitLab v16.5's own protos against kas", () => {
  let redis: RedisServer;
  let kube: KubeApiServer;
  let dir: string;
  const replicas: InProcessKas[] = [];
  const trackers: grpc.Client[] = [];
  const jwts: string[] = [];
  let agent: InProcessAgentk;
  let storage: TestStorage;
  let repo: TestRepo;
  let gitaly: GitalyTestServer;

  /** Replica `i`'s answer to GitLab's GetConnectedAgents. */
  const getConnectedAgents = (i: number, request: object) =>
    unary<Agents>(trackers[i]!, "GetConnectedAgents", request, bearer(jwts[i]!), {
      deadline: Date.now() + DEADLINE_MS,
    });
  const expectedMeta = {
    version: VERSION,
    commit_id: commitId(),
    pod_namespace: "gitlab-agent",
    pod_name: "agentk-ref",
    kubernetes_version: {
      major: KUBE_VERSION.major,
      minor: KUBE_VERSION.minor,
      git_version: KUBE_VERSION.gitVersion,
      platform: KUBE_VERSION.platform,
    },
  };

  beforeAll(async () => {
    redis = await RedisServer.start();
    kube = await startKubeApiServer();
    dir = await mkdtemp(join(tmpdir(), "gitlab-reference-"));
    const connection = redis.connection as { host: string; port: number };
    for (let i = 0; i < 2; i++) {
      const kas = await startInProcessKas(() => {}, { redis: connection });
      replicas.push(kas);
      jwts.push(await gitlabJwt(kas.apiSecret, { iss: "gitlab.example.com" }));
      trackers.push(new reference.AgentTracker(grpcTarget(kas.addresses.api!), insecure));
    }
    // The tunnel is at replica 0 only: replica 1 answers from replica 0's summary in Redis.
    agent = await startInProcessAgentk({
      kasUrl: replicas[0]!.addresses.agent,
      token: TOKEN,
      kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
      pod: { name: "agentk-ref", namespace: "gitlab-agent" },
    });
    await agent.agent.client.ready(5000);

    storage = await TestStorage.create();
    repo = await storage.init("group/agents.git");
    await repo.commit({ ".gitlab/agents/prod/config.yaml": "{}\n" });
    await repo.commit({ ".gitlab/agents/canary/config.yaml": "{}\n" }, "release");
    gitaly = await GitalyTestServer.start({ storages: { default: storage.root }, token: GITALY_TOKEN });
  });
  afterAll(async () => {
    for (const t of trackers) t.close();
    await agent?.stop();
    for (const kas of replicas) await kas.close();
    await kube?.close();
    await gitaly?.close();
    await storage?.remove();
    await redis?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("GetConnectedAgents by agent and by project, on every replica: agentk's commit and its cluster's /version", async () => {
    expect(expectedMeta.commit_id).toMatch(/^[0-9a-f]{40}$/);
    // agentk reports at once, then again when it has read /version: wait for that report to arrive.
    await until(
      async () =>
        (await getConnectedAgents(1, { agent_id: AGENT_ID })).agents[0]?.agent_meta?.kubernetes_version
          ?.git_version === KUBE_VERSION.gitVersion,
      DEADLINE_MS,
      "the Kubernetes version reported through replica 1",
    );
    for (const i of [0, 1]) {
      for (const request of [{ agent_id: AGENT_ID }, { project_id: "7" }]) {
        const { agents } = await getConnectedAgents(i, request);
        expect(agents, `replica ${i}, ${JSON.stringify(request)}`).toHaveLength(1);
        expect(agents[0]).toMatchObject({ agent_id: AGENT_ID, project_id: "7", agent_meta: expectedMeta });
        expect(agents[0]!.connection_id).not.toBe("0");
      }
      expect((await getConnectedAgents(i, { project_id: "8" })).agents).toEqual([]);
    }
  });

  it("the By... methods of newer GitLab (kas's copy of their wire names) answer the same", async () => {
    const own = gitlabServiceClients();
    const client = new own.AgentTracker(grpcTarget(replicas[1]!.addresses.api!), insecure);
    try {
      await until(
        async () =>
          (
            await unary<Agents>(
              client,
              "GetConnectedAgentsByAgentIDs",
              { agent_ids: [AGENT_ID] },
              bearer(jwts[1]!),
            )
          ).agents[0]?.agent_meta?.kubernetes_version?.git_version === KUBE_VERSION.gitVersion,
        DEADLINE_MS,
        "the Kubernetes version through GetConnectedAgentsByAgentIDs",
      );
      const byProject = await unary<Agents>(
        client,
        "GetConnectedAgentsByProjectIDs",
        { project_ids: ["7"] },
        bearer(jwts[1]!),
      );
      const single = await getConnectedAgents(1, { project_id: "7" });
      expect(byProject.agents).toEqual(single.agents);
      expect(byProject.agents[0]?.agent_meta).toMatchObject(expectedMeta);
    } finally {
      client.close();
    }
  });

  it("GetConnectedAgents without an id, or with one GitLab cannot have: INVALID_ARGUMENT", async () => {
    for (const request of [{}, { agent_id: "0" }, { project_id: "-3" }]) {
      const err = await failure(getConnectedAgents(0, request));
      expect(err.code, JSON.stringify(request)).toBe(grpc.status.INVALID_ARGUMENT);
    }
  });

  it("ListAgentConfigFiles lists default_branch's files, the repository's default branch without it", async () => {
    const client = new reference.ConfigurationProject(grpcTarget(replicas[0]!.addresses.api!), insecure);
    const list = async (default_branch?: string) =>
      (
        await unary<Listing>(
          client,
          "ListAgentConfigFiles",
          {
            repository: {
              storage_name: "default",
              relative_path: "group/agents.git",
              gl_repository: "project-9",
              gl_project_path: "group/agents",
            },
            gitaly_info: { address: gitaly.address, token: GITALY_TOKEN, features: {} },
            ...(default_branch !== undefined && { default_branch }),
          },
          bearer(jwts[0]!),
          { deadline: Date.now() + DEADLINE_MS },
        )
      ).config_files.map((f) => f.agent_name);
    try {
      expect(await list()).toEqual(["prod"]);
      expect(await list("main")).toEqual(["prod"]);
      // Each commit of the test repository holds only its own files: release has canary alone.
      expect(await list("release")).toEqual(["canary"]);
      expect(await list("refs/heads/release")).toEqual(["canary"]);
      // No such branch: nothing to list, as GitLab's kas answers (Gitaly's NOT_FOUND).
      expect(await list("gone")).toEqual([]);
    } finally {
      client.close();
    }
  });
});
