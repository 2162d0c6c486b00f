// Both daemons as processes, as operators run them: kas (cmd/kas/main.ts) and agentk
// (cmd/agentk/main.ts), a Kubernetes API server and an in-cluster service behind agentk.
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { kubeClient, rawUpgrade } from "../agentk/support/kube-client.ts";
import { type JsonLinesProcess, msg, spawnAgentk } from "../agentk/support/processes.ts";
import { gitlabJwt, TOKEN, writeFixtures } from "../kas/support/fixtures.ts";
import { type KasProcess, portsEnv, spawnKas } from "../kas/support/kas-process.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import { until } from "../support/until.ts";

describe("kas and agentk as processes", () => {
  let dir: string;
  let files: Awaited<ReturnType<typeof writeFixtures>>;
  let cluster: KubeApiServer;
  let service: Server;
  let kas: KasProcess;
  let agentk: JsonLinesProcess;

  const gitlab = async (path: string) =>
    fetch(`${kas.addresses.api}${path}`, {
      headers: { "gitlab-kas-api-request": await gitlabJwt(files.apiSecret) },
    });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "e2e-"));
    files = await writeFixtures(dir);
    cluster = await startKubeApiServer();
    service = createServer((req, res) => res.end(`metrics at ${req.url}\n`));
    service.listen(0, "127.0.0.1");
    await once(service, "listening");
    kas = await spawnKas({
      ...portsEnv(),
      KAS_AGENT_STATIC_TOKENS_FILE: files.tokensFile,
      KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.apiSecretFile,
    });
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, TOKEN);
    agentk = spawnAgentk(
      [
        "--kas-address",
        kas.addresses.agent,
        "--token-file",
        tokenFile,
        "--kubeconfig",
        await cluster.writeKubeconfig(join(dir, "kubeconfig")),
        "--service",
        `prometheus=http://127.0.0.1:${(service.address() as AddressInfo).port}`,
      ],
      {
        AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0",
        POD_NAME: "agentk-e2e",
        POD_NAMESPACE: "gitlab-agent",
      },
    );
    await agentk.waitFor(msg("connected to kas"));
  });
  afterAll(async () => {
    agentk?.kill();
    kas?.kill();
    await cluster?.close();
    service?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test("GitLab lists the agent with the pod it reported, and reaches its service through both daemons", async () => {
    let agents: Array<{ agentId: string; pods?: Array<{ name: string }> }> = [];
    // The report arrives over agentk's gRPC channel, shortly after the tunnel.
    await until(
      async () => {
        agents = ((await (await gitlab("/api/v1/agents")).json()) as { agents: typeof agents }).agents;
        return agents[0]?.pods !== undefined;
      },
      10_000,
      "the agent's report",
    );
    expect(agents).toMatchObject([
      { agentId: "42", tunnels: 1, pods: [{ name: "agentk-e2e", namespace: "gitlab-agent" }] },
    ]);
    // kas's log names the replica behind the tunnel.
    const connected = kas
      .out()
      .split("\n")
      .find((l) => l.includes('"msg":"agent connected"'));
    expect(JSON.parse(connected!)).toMatchObject({
      agentId: "42",
      pod: { name: "agentk-e2e", namespace: "gitlab-agent" },
    });
    const res = await gitlab("/api/v1/agents/42/services/prometheus/metrics?x=1");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("metrics at /metrics?x=1\n");
  });

  test("the real Kubernetes client lists namespaces, and exec upgrades, through kas's proxy and agentk", async () => {
    const { core } = kubeClient(kas.addresses.kubernetesApi, { token: TOKEN });
    const namespaces = await core.listNamespace();
    expect(namespaces.items.map((n) => n.metadata?.name).sort()).toEqual(["default", "kube-system"]);
    // agentk used its own credentials, not the dev token kas accepted.
    const seen = cluster.requests.filter((r) => r.path.startsWith("/api/v1/namespaces"));
    expect(seen.at(-1)?.headers.authorization).toBe(`Bearer ${cluster.token}`);

    // A write through both daemons, then exec into what was written.
    await core.createNamespacedPod({
      namespace: "default",
      body: { apiVersion: "v1", kind: "Pod", metadata: { name: "web" } },
    });
    const port = Number(new URL(kas.addresses.kubernetesApi).port);
    const exec = await rawUpgrade({ port }, "/api/v1/namespaces/default/pods/web/exec?command=sh", {
      authorization: `Bearer ${TOKEN}`,
      upgrade: "SPDY/3.1",
    });
    expect(exec.head).toMatch(/^HTTP\/1.1 101 /);
    await exec.received.until("exec default/web\n");
    exec.socket.write("ping\n");
    expect(await exec.received.until("ping\n")).toContain("ping\n");
    exec.socket.destroy();
  });

  test("refusals end to end: a service not allow-listed is 404, a wrong token never gets a tunnel", async () => {
    const notListed = await gitlab("/api/v1/agents/42/services/grafana/");
    expect(notListed.status).toBe(404);
    expect(((await notListed.json()) as { error: string }).error).toContain('"grafana" is not allow-listed');

    const wrongToken = join(dir, "wrong-token");
    await writeFile(wrongToken, "not-a-token");
    const intruder = spawnAgentk(["--kas-address", kas.addresses.agent, "--token-file", wrongToken], {
      AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0",
    });
    try {
      const [retry] = await intruder.waitFor(msg("cannot reach kas; retrying"));
      expect(retry).toMatchObject({ status: 401, reason: "dial" });
      expect(intruder.output).not.toContain("not-a-token");
    } finally {
      intruder.kill();
    }
  });
});
