// agentk reads its cluster's /version again while it runs (clusters are upgraded under a running
// agent) and reports a change at once: GitLab then shows the new version without a reconnect.
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { readKubernetesVersion } from "../../../modules/agent_tracker/agentk/kubernetes-version.ts";
import { AGENT_ID, gitlabJwt, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { bearer, grpcTarget, unary } from "../../support/gitlab-grpc.ts";
import { gitlabReferenceClients } from "../../support/gitlab-reference-grpc.ts";
import { kubeconfigYaml } from "../../support/kubeconfig.ts";
import { until } from "../../support/until.ts";

type Agents = { agents: Array<{ agent_meta: { kubernetes_version: { git_version: string } | null } }> };

describe("agentk follows its cluster's version", () => {
  // A stand-in API server that only answers /version, with a version the test changes.
  let gitVersion = "v1.31.4";
  const versionCalls: number[] = [];
  const cluster = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url !== "/version") {
      res.writeHead(404, { "content-type": "application/json" }).end('{"kind":"Status","code":404}');
      return;
    }
    versionCalls.push(Date.now());
    const [major, minor] = gitVersion.slice(1).split(".");
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ major, minor, gitVersion, platform: "linux/arm64" }));
  };
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let client: grpc.Client;
  let jwt: string;
  const reported = async () => {
    const { agents } = await unary<Agents>(client, "GetConnectedAgents", { agent_id: AGENT_ID }, bearer(jwt));
    return agents[0]?.agent_meta?.kubernetes_version?.git_version;
  };

  beforeAll(async () => {
    kas = await startInProcessKas();
    jwt = await gitlabJwt(kas.apiSecret);
    client = new (gitlabReferenceClients().AgentTracker)(
      grpcTarget(kas.addresses.api!),
      grpc.credentials.createInsecure(),
    );
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      kubernetes: cluster,
      versionIntervalMs: 50,
    });
  });
  afterAll(async () => {
    client?.close();
    await agent?.stop();
    await kas?.close();
  });

  test("read at start, read again on its interval, the new version reported on the same tunnel", async () => {
    await until(async () => (await reported()) === "v1.31.4", 10_000, "the first version reported");
    const tunnel = agent.agent.client.active;
    gitVersion = "v1.32.1";
    await until(async () => (await reported()) === "v1.32.1", 10_000, "the upgraded version reported");
    expect(agent.agent.client.active).toBe(tunnel);
    expect(versionCalls.length).toBeGreaterThanOrEqual(2);
  });
});

test("an API server that never answers /version: the read fails at its deadline, not never", async () => {
  const silent = createServer(() => {}); // accepts, reads the request, never answers
  silent.listen(0, "127.0.0.1");
  await once(silent, "listening");
  try {
    const kc = new KubeConfig();
    kc.loadFromString(
      kubeconfigYaml({
        server: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
        insecureSkipTlsVerify: true,
      }),
    );
    const started = Date.now();
    await expect(readKubernetesVersion(kc, 300)).rejects.toThrow(/did not answer within 300 ms/);
    expect(Date.now() - started).toBeLessThan(5000);
  } finally {
    silent.closeAllConnections();
    silent.close();
  }
});
