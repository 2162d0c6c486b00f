// GitLab's API answers the kubeconfig `kas kubeconfig --agent-id N` prints (one function serves
// both): behind GitLab's JWT, with the proxy's bound URL, kas's CA and the agent's static token;
// kubectl works with it through the tunnel in one step.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parse } from "yaml";
import { kubeconfigFor } from "../../../cmd/kas/kubeconfig.ts";
import { gitlabJwt, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { kubectlFor } from "../../support/kube/kubectl.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";

let dir: string;
let kube: KubeApiServer;
let kas: InProcessKas;
let agent: InProcessAgentk;

const kubeconfigUrl = (agentId: string, query = "") =>
  `${kas.addresses.api}/api/v1/agents/${agentId}/kubeconfig${query}`;
const withJwt = async () => ({ "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret) });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-kubeconfig-api-"));
  kube = await startKubeApiServer();
  kube.store.create("pods", "default", {
    metadata: { name: "hello" },
    spec: { containers: [{ name: "main", image: "busybox" }] },
    status: { phase: "Running" },
  });
  kas = await startInProcessKas((c) => {
    // kas's defaults: TLS with the certificate it makes under data_dir.
    c.agent.kubernetesApi.listen.plaintext = false;
    c.dataDir = join(dir, "data");
  });
  agent = await startInProcessAgentk({
    kasUrl: kas.addresses.agent,
    token: TOKEN,
    kubernetes: await kube.writeKubeconfig(join(dir, "agentk-kubeconfig")),
  });
  await agent.agent.client.ready(10_000);
}, 30_000);
afterAll(async () => {
  await agent?.stop();
  await kas?.close();
  await kube?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("GET /api/v1/agents/{agent_id}/kubeconfig", () => {
  test("the CLI's kubeconfig, for the proxy's bound URL; kubectl works with it", async () => {
    const res = await fetch(kubeconfigUrl("42"), { headers: await withJwt() });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/yaml");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const yaml = await res.text();
    const doc = parse(yaml);
    const server = doc.clusters[0].cluster.server as string;
    expect(server).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(server).port).toBe(new URL(kas.addresses.kubernetesApi!).port);
    expect(doc.users[0].user.token).toBe(TOKEN);
    // What `kas kubeconfig --agent-id 42 --server <that URL>` prints, byte for byte.
    expect(yaml).toBe(await kubeconfigFor({ agentId: "42", server }, kas.config));

    const k = await kubectlFor({ writeKubeconfig: (path) => writeFile(path, yaml).then(() => path) });
    try {
      const pods = await k.run(["get", "pods", "-n", "default"]);
      expect(pods.code, pods.stderr).toBe(0);
      expect(pods.stdout).toMatch(/^hello\s+\S+\s+Running/m);
    } finally {
      await k.close();
    }
  });

  test("?server= names the proxy as kubectl reaches it (behind a load balancer)", async () => {
    const res = await fetch(kubeconfigUrl("42", "?server=https://kas.example.com/k8s-proxy"), {
      headers: await withJwt(),
    });
    expect(res.status).toBe(200);
    expect(parse(await res.text()).clusters[0].cluster.server).toBe("https://kas.example.com/k8s-proxy");
  });

  test("refused: without GitLab's JWT 401; an agent without a static token 404; bad input 400; not GET 405", async () => {
    const noJwt = await fetch(kubeconfigUrl("42"));
    expect(noJwt.status).toBe(401);
    expect(await noJwt.text()).not.toContain(TOKEN);
    const headers = await withJwt();
    const unknown = await fetch(kubeconfigUrl("99"), { headers });
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain("agent 99 has no token in agent.static_tokens_file");
    expect((await fetch(kubeconfigUrl("0"), { headers })).status).toBe(400);
    expect((await fetch(kubeconfigUrl("42", "?server=file:///etc/passwd"), { headers })).status).toBe(400);
    expect((await fetch(kubeconfigUrl("42"), { method: "POST", headers })).status).toBe(405);
  });
});
