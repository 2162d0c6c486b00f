// Agent tracking end to end: agentk reports its version and pod over its gRPC channel to kas;
// kas files the report under the agent of the tunnel it came over and lists it.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createAgentRpcServer } from "../../../cmd/kas/agent-rpc.ts";
import { type AgentkModuleFactory, Phase } from "../../../modules/runtime/index.ts";
import { AgentMeta, AgentTrackerServiceClient } from "../../../proto/gen/agent_tracker/v1/agent_tracker.ts";
import { VERSION } from "../../../tool/version.ts";
import { gitlabJwt, OTHER_TOKEN, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { bearer, gitlabServiceClients, grpcTarget, unary } from "../../support/gitlab-grpc.ts";
import { until } from "../../support/until.ts";

interface Connection {
  connectionId: string;
  connectedAt: string;
  pod?: { name: string };
}
/** GitLab's ConnectedAgentInfo, as its Ruby stubs read it (proto field names, int64 as decimal). */
interface ConnectedAgentInfo {
  connection_id: string;
  agent_id: string;
  connected_at: { seconds: string };
  agent_meta: { pod_name: string };
}

describe("agent tracker: agentk reports itself, kas lists it", () => {
  let kas: InProcessKas;
  const agents: InProcessAgentk[] = [];
  const list = async () => {
    const res = await fetch(`${kas.addresses.api}/api/v1/agents`, {
      headers: { "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret) },
    });
    return (
      (await res.json()) as {
        agents: Array<{ agentId: string; pods?: unknown[]; connections?: Connection[] }>;
      }
    ).agents;
  };
  /** agent 42's connections as the HTTP API lists them, by the pod behind each. */
  const connectionsByPod = async () =>
    Object.fromEntries(
      ((await list()).find((a) => a.agentId === "42")?.connections ?? []).map((c) => [c.pod?.name, c]),
    );
  /** GitLab's gRPC call for agent 42. */
  const byAgentId = async () => {
    const client = new (gitlabServiceClients().AgentTracker)(
      grpcTarget(kas.addresses.api!),
      grpc.credentials.createInsecure(),
    );
    try {
      const jwt = await gitlabJwt(kas.apiSecret);
      const answer = await unary<{ agents: ConnectedAgentInfo[] }>(
        client,
        "GetConnectedAgentsByAgentIDs",
        { agent_ids: ["42"] },
        bearer(jwt),
        { deadline: Date.now() + 10_000 },
      );
      return answer.agents;
    } finally {
      client.close();
    }
  };

  beforeAll(async () => {
    kas = await startInProcessKas();
    agents.push(
      await startInProcessAgentk({
        kasUrl: kas.addresses.agent,
        token: TOKEN,
        pod: { name: "agentk-a", namespace: "gitlab-agent" },
      }),
      await startInProcessAgentk({
        kasUrl: kas.addresses.agent,
        token: TOKEN,
        pod: { name: "agentk-b", namespace: "gitlab-agent" },
      }),
      await startInProcessAgentk({
        kasUrl: kas.addresses.agent,
        token: OTHER_TOKEN,
        pod: { name: "other", namespace: "ops" },
      }),
    );
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await kas.close();
  });

  test("each report is filed under the agent whose tunnel carried it", async () => {
    await until(
      async () => (await list()).every((a) => (a.pods?.length ?? 0) > 0) && (await list()).length === 2,
      10_000,
      "reports",
    );
    expect(await list()).toMatchObject([
      {
        agentId: "42",
        tunnels: 2,
        pods: [
          { namespace: "gitlab-agent", name: "agentk-a", version: VERSION },
          { namespace: "gitlab-agent", name: "agentk-b", version: VERSION },
        ],
      },
      { agentId: "43", tunnels: 1, pods: [{ namespace: "ops", name: "other", version: VERSION }] },
    ]);
  });

  test("each connection has its own id, the same over HTTP/JSON and GitLab's gRPC", async () => {
    const http = await connectionsByPod();
    const a = http["agentk-a"]!;
    const b = http["agentk-b"]!;
    expect(Object.keys(http).sort()).toEqual(["agentk-a", "agentk-b"]);
    for (const c of [a, b]) expect(c.connectionId).toMatch(/^[1-9]\d{0,18}$/);
    expect(a.connectionId).not.toBe(b.connectionId);

    // GitLab's ConnectedAgentInfo: one per connection (two agentk replicas, two entries).
    const infos = await byAgentId();
    expect(
      infos
        .map((i) => ({
          pod: i.agent_meta.pod_name,
          id: i.connection_id,
          agent: i.agent_id,
          at: Number(i.connected_at.seconds),
        }))
        .sort((x, y) => (x.pod < y.pod ? -1 : 1)),
    ).toEqual(
      [a, b].map((c) => ({
        pod: c.pod?.name,
        id: c.connectionId,
        agent: "42",
        at: Math.floor(Date.parse(c.connectedAt) / 1000),
      })),
    );
    // Stable while the connection lasts.
    expect((await connectionsByPod())["agentk-a"]?.connectionId).toBe(a.connectionId);
  });

  test("a new tunnel reports again: a pod's report follows its reconnect, under a new connection id", async () => {
    const oldId = (await connectionsByPod())["agentk-a"]!.connectionId;
    const [a] = agents;
    a!.agent.client.active!.destroy(); // the tunnel drops; agentk reconnects and reports on the new one
    await until(() => a!.agent.client.active !== undefined, 10_000, "reconnect");
    await until(
      async () => JSON.stringify((await list())[0]?.pods ?? []).includes("agentk-a"),
      10_000,
      "agentk-a listed again",
    );
    expect((await list())[0]).toMatchObject({ agentId: "42", tunnels: 2 });
    const after = await connectionsByPod();
    expect(after["agentk-a"]!.connectionId).not.toBe(oldId);
    expect((await byAgentId()).map((i) => i.connection_id)).toContain(after["agentk-a"]!.connectionId);
  });

  test("kas drains a tunnel: the agent's gRPC channel moves to its next tunnel, which reports again", async () => {
    const before = [...kas.kas.agents!.server.sessions].filter((t) => t.identity.agentId === "43");
    expect(before).toHaveLength(1);
    before[0]!.goAway(); // as for max_connection_age: GoAway, and GOAWAY on its gRPC connections
    // The old tunnel closes once its gRPC connection has left it: nothing else holds it.
    await new Promise((resolve) =>
      before[0]!.closed ? resolve(undefined) : before[0]!.once("close", resolve),
    );
    await until(
      async () => (await list()).find((a) => a.agentId === "43")?.pods?.length === 1,
      10_000,
      "agent 43's pod listed for its new tunnel",
    );
    const after = [...kas.kas.agents!.server.sessions].filter((t) => t.identity.agentId === "43");
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(before[0]);
    expect((await list()).find((a) => a.agentId === "43")).toMatchObject({
      tunnels: 1,
      pods: [{ name: "other" }],
    });
  });
});

describe("the agents' gRPC server", () => {
  test("a call that did not come over an agent's tunnel is UNAUTHENTICATED", async () => {
    const rpc = createAgentRpcServer(1000);
    // Served on a plain port: no tunnel, so no agent behind the call.
    const { addAgentTrackerService } = await import("../../../modules/agent_tracker/kas/rpc.ts");
    addAgentTrackerService(rpc, { report: () => {} });
    const port = await new Promise<number>((resolve, reject) =>
      rpc.server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    const client = new AgentTrackerServiceClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      const err = await new Promise<grpc.ServiceError | null>((resolve) =>
        client.reportAgent(
          { agentMeta: AgentMeta.fromPartial({ version: "1", podName: "x", podNamespace: "y" }) },
          (e) => resolve(e),
        ),
      );
      expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
    } finally {
      client.close();
      rpc.server.forceShutdown();
    }
  });
});

describe("what an agent reports is bounded", () => {
  test("a field past 253 characters (commit_id, kubernetes_version's) is INVALID_ARGUMENT, and not listed", async () => {
    const kas = await startInProcessKas();
    const answers: Array<grpc.ServiceError | null> = [];
    // A module of the test's own, on agentk's gRPC channel: an agent that says too much.
    const liar: AgentkModuleFactory = {
      name: "liar",
      phase: Phase.capability,
      create: ({ kasRpc }) => {
        const client = new AgentTrackerServiceClient("kas", grpc.credentials.createInsecure(), {
          channelOverride: kasRpc,
        });
        const long = "x".repeat(254);
        const report = (meta: Partial<AgentMeta>) =>
          client.reportAgent(
            { agentMeta: AgentMeta.fromPartial({ version: "1", podName: "liar", ...meta }) },
            new grpc.Metadata({ waitForReady: true }),
            { deadline: Date.now() + 10_000 },
            (err) => answers.push(err),
          );
        return {
          name: "liar",
          start() {
            report({ commitId: long });
            report({ kubernetesVersion: { major: "1", minor: "32", gitVersion: long, platform: "linux" } });
          },
        };
      },
    };
    const agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      pod: { name: "honest" },
      modules: [liar],
    });
    try {
      await until(() => answers.length === 2, 10_000, "both reports answered");
      expect(answers.map((e) => e?.code)).toEqual([
        grpc.status.INVALID_ARGUMENT,
        grpc.status.INVALID_ARGUMENT,
      ]);
      const res = await fetch(`${kas.addresses.api}/api/v1/agents`, {
        headers: { "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret) },
      });
      const listed = JSON.stringify(await res.json());
      expect(listed).not.toContain("liar");
    } finally {
      await agent.stop();
      await kas.close();
    }
  });
});
