// The real kubectl -> kas's Kubernetes API proxy (TLS, the agent's token as the bearer token) ->
// the agent's tunnel -> agentk's Kubernetes API half (its own credentials) -> the Kubernetes test server.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { stringify } from "yaml";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { type Kubectl, kubectlFor } from "../../support/kube/kubectl.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { writeKubeconfig } from "../../support/kubeconfig.ts";
import { testPki } from "../../support/tls-certs.ts";
import { until } from "../../support/until.ts";

let kube: KubeApiServer;
let kas: InProcessKas;
let agent: InProcessAgentk;
let dir: string;
let kubectl: Kubectl;
const extra: Kubectl[] = [];

/**
 * kubectl whose kubeconfig names kas's proxy (its CA trusted) and `token` as the bearer token. Without
 * a token, kubectl would prompt for a username and password (and fail on EOF before any request):
 * the user has a client certificate instead, which kas never asks for, so no credentials are sent.
 */
async function kubectlThroughKas(token: string | undefined): Promise<Kubectl> {
  const pki = await testPki();
  return kubectlFor({
    writeKubeconfig: (path) =>
      writeKubeconfig(path, {
        server: kas.addresses.kubernetesApi,
        caCert: pki.caCert,
        ...(token === undefined ? { clientCertificate: pki } : { token }),
        namespace: "default",
      }),
  });
}

beforeAll(async () => {
  kube = await startKubeApiServer();
  dir = await mkdtemp(join(tmpdir(), "kubectl-kas-"));
  const pki = await testPki();
  const certificateFile = join(dir, "kas.crt");
  const keyFile = join(dir, "kas.key");
  await writeFile(certificateFile, pki.cert);
  await writeFile(keyFile, pki.key);
  kas = await startInProcessKas((c) => {
    c.agent.kubernetesApi.listen.certificateFile = certificateFile;
    c.agent.kubernetesApi.listen.keyFile = keyFile;
  });
  agent = await startInProcessAgentk({
    kasUrl: kas.addresses.agent,
    token: TOKEN,
    kubernetes: await kube.writeKubeconfig(join(dir, "agentk-kubeconfig")),
  });
  await agent.agent.client.ready(5000);
  kubectl = await kubectlThroughKas(TOKEN);
  // The pod that get, logs and exec use.
  kube.store.create("pods", "default", {
    metadata: { name: "web" },
    spec: { containers: [{ name: "main", image: "busybox" }] },
    status: { phase: "Running" },
  });
});
afterAll(async () => {
  await Promise.all([kubectl, ...extra].map((k) => k?.close()));
  await agent?.stop();
  await kas?.close();
  await kube?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl.run(args, input === undefined ? {} : { input });
  expect(r.code, `kubectl ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

/** How many of kubectl's requests reached the Kubernetes test server (agentk's other modules make some too). */
const fromKubectl = () => kube.requests.filter((r) => r.headers["user-agent"]?.startsWith("kubectl")).length;

/** Requests that reached the Kubernetes test server with agentk's credentials (never the caller's). */
const upstream = (path: string) => kube.requests.filter((r) => r.path.includes(path));

function deployment(name: string, replicas: number, image = "nginx:1.25") {
  return stringify({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "default", labels: { app: name } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "nginx", image }] } },
    },
  });
}
/** How many Upgrades kas's proxy answered with 101, from its metrics. */
async function upgradesAtKas(): Promise<number> {
  const text = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
  const line = text
    .split("\n")
    .find(
      (l) =>
        l.startsWith("kas_request_duration_seconds_count{") &&
        l.includes('route="kubernetes_api_upgrade"') &&
        l.includes('status="101"'),
    );
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
}

type Deployment = KubeObject & {
  spec: { replicas: number; template: { spec: { containers: { image: string }[] } } };
};
const getDeployment = (name: string) => kube.store.get("deployments", "default", name) as Deployment;

describe("kubectl through kas's Kubernetes API proxy (TLS, agent token) and agentk", () => {
  test("the proxy listener serves TLS", () => {
    expect(kas.addresses.kubernetesApi).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  test("version and api-resources: discovery through kas", async () => {
    const version = await ok(["version", "-o", "json"]);
    expect(JSON.parse(version).serverVersion).toMatchObject({ major: "1" });
    const resources = await ok(["api-resources", "--no-headers"]);
    expect(resources).toMatch(/^pods\s+po\s+v1\s+true\s+Pod$/m);
    expect(resources).toMatch(/^deployments\s+deploy\s+apps\/v1\s+true\s+Deployment$/m);
    // Every request the API server saw carried agentk's credentials, not the agent token kubectl sent.
    // kubectl's own /version (agentk reads /version too, for the version it reports to kas).
    expect(upstream("/version").some((r) => r.headers["user-agent"]?.startsWith("kubectl"))).toBe(true);
    expect(fromKubectl()).toBeGreaterThan(0);
    for (const r of kube.requests) expect(r.headers.authorization).toBe(`Bearer ${kube.token}`);
  });

  test("get pods -A, then get -w: a pod created in the cluster shows up", async () => {
    kube.store.create("pods", "kube-system", {
      metadata: { name: "dns" },
      spec: { containers: [{ name: "main", image: "coredns" }] },
      status: { phase: "Pending" },
    });
    const all = await ok(["get", "pods", "-A"]);
    expect(all).toMatch(/^NAMESPACE\s+NAME\s+READY\s+STATUS/m);
    expect(all).toMatch(/^default\s+web\s+\S+\s+Running/m);
    expect(all).toMatch(/^kube-system\s+dns\s+\S+\s+Pending/m);

    const watch = kubectl.start(["get", "pods", "-w"]);
    try {
      await watch.line(/^web\s/);
      kube.store.create("pods", "default", {
        metadata: { name: "late" },
        spec: { containers: [{ name: "main", image: "busybox" }] },
        status: { phase: "Pending" },
      });
      expect(await watch.line(/^late\s/)).toMatch(/Pending/);
      expect(upstream("watch=true").length).toBeGreaterThan(0);
    } finally {
      await watch.stop();
    }
  });

  test("create -f and delete", async () => {
    const cm = stringify({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "settings", namespace: "default" },
      data: { mode: "through-kas" },
    });
    expect(await ok(["create", "-f", "-"], cm)).toContain("configmap/settings created");
    expect(kube.store.get("configmaps", "default", "settings")).toMatchObject({
      data: { mode: "through-kas" },
    });
    const again = await kubectl.run(["create", "-f", "-"], { input: cm });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('configmaps "settings" already exists');
    expect(await ok(["delete", "configmap", "settings"])).toContain('configmap "settings" deleted');
    expect(kube.store.has("configmaps", "default", "settings")).toBe(false);
  });

  test("apply --server-side; another manager's conflict, then --force-conflicts", async () => {
    expect(await ok(["apply", "--server-side", "-f", "-"], deployment("ssa", 2))).toContain(
      "deployment.apps/ssa serverside-applied",
    );
    expect(getDeployment("ssa").spec.replicas).toBe(2);
    expect(getDeployment("ssa").metadata.managedFields).toEqual([
      expect.objectContaining({ manager: "kubectl", operation: "Apply" }),
    ]);

    const theirs = deployment("ssa", 3);
    const refused = await kubectl.run(["apply", "--server-side", "--field-manager=other", "-f", "-"], {
      input: theirs,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas');
    expect(getDeployment("ssa").spec.replicas).toBe(2);

    expect(
      await ok(["apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"], theirs),
    ).toContain("deployment.apps/ssa serverside-applied");
    expect(getDeployment("ssa").spec.replicas).toBe(3);
    expect(getDeployment("ssa").metadata.managedFields).toContainEqual(
      expect.objectContaining({
        manager: "other",
        operation: "Apply",
        fieldsV1: expect.objectContaining({ "f:spec": expect.objectContaining({ "f:replicas": {} }) }),
      }),
    );
  });

  test("apply (client-side): created, then configured", async () => {
    expect(await ok(["apply", "-f", "-"], deployment("csa", 1))).toContain("deployment.apps/csa created");
    const created = getDeployment("csa");
    expect(created.metadata.annotations?.["kubectl.kubernetes.io/last-applied-configuration"]).toContain(
      '"replicas":1',
    );
    expect(await ok(["apply", "-f", "-"], deployment("csa", 4, "nginx:1.26"))).toContain(
      "deployment.apps/csa configured",
    );
    const now = getDeployment("csa");
    expect(now.spec.replicas).toBe(4);
    expect(now.spec.template.spec.containers[0]?.image).toBe("nginx:1.26");
    expect(await ok(["delete", "-f", "-"], deployment("csa", 4))).toContain('deployment.apps "csa" deleted');
    expect(kube.store.has("deployments", "default", "csa")).toBe(false);
  });

  test("logs -f: what was logged, then each new line as it is appended", async () => {
    kube.appendLog("default", "web", "booting");
    const logs = kubectl.start(["logs", "-f", "web"]);
    try {
      await logs.line("booting");
      kube.appendLog("default", "web", "listening on :8080");
      await logs.line("listening on :8080");
      expect(logs.lines).toEqual(["booting", "listening on :8080"]);
    } finally {
      await logs.stop();
    }
  });

  test("exec over WebSocket passes through kas and agentk as an Upgrade", async () => {
    const before = upstream("/pods/web/exec").length;
    const upgradesBefore = await upgradesAtKas();
    expect(await kubectl.run(["exec", "web", "--", "echo", "hello", "through", "kas"])).toMatchObject({
      code: 0,
      stdout: "hello through kas\n",
    });
    expect(await kubectl.run(["exec", "-i", "web", "--", "cat"], { input: "one\ntwo\n" })).toMatchObject({
      code: 0,
      stdout: "one\ntwo\n",
    });
    const failed = await kubectl.run(["exec", "web", "--", "sh", "-c", "exit 3"]);
    expect(failed.code).toBe(3);
    expect(failed.stderr).toContain("command terminated with exit code 3");
    const execs = upstream("/pods/web/exec").slice(before);
    expect(execs).toHaveLength(3);
    for (const r of execs) {
      expect(r.headers.upgrade?.toLowerCase()).toBe("websocket");
      expect(r.headers["sec-websocket-protocol"]).toContain("v5.channel.k8s.io");
      expect(r.headers.authorization).toBe(`Bearer ${kube.token}`);
    }
    // kas counts an Upgrade on its route when the spliced connection ends (just after kubectl exits):
    // all three answered 101 there, not as plain requests.
    await until(
      async () => (await upgradesAtKas()) === upgradesBefore + 3,
      5000,
      "kas to count 3 more Upgrades answered 101",
    );
  });

  test("a wrong token: Unauthorized from kas (401 Status), nothing reaches the cluster", async () => {
    const seen = fromKubectl();
    const wrong = await kubectlThroughKas("not-an-agent-token");
    extra.push(wrong);
    const r = await wrong.run(["get", "pods", "-v=8"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain("error: You must be logged in to the server");
    expect(r.stderr).toMatch(/Response Status: 401 Unauthorized/);
    expect(r.stderr).toMatch(/"kind":"Status".*"reason":"Unauthorized".*"code":401/);
    expect(r.stderr).toContain('"message":"agent token is invalid or revoked"');
    expect(fromKubectl(), r.stderr).toBe(seen);
  });

  test("no token: 401", async () => {
    const seen = fromKubectl();
    const none = await kubectlThroughKas(undefined);
    extra.push(none);
    const r = await none.run(["get", "pods", "-v=8"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain("error: You must be logged in to the server");
    expect(r.stderr).toMatch(/Response Status: 401 Unauthorized/);
    expect(r.stderr).toMatch(/"kind":"Status".*"reason":"Unauthorized".*"code":401/);
    expect(r.stderr).toContain('"message":"expected \\"Authorization: Bearer ci:<agent id>:');
    expect(fromKubectl(), r.stderr).toBe(seen);
  });
});
