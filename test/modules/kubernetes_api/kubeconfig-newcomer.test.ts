// kubectl as a newcomer uses it: kas on its defaults (a static dev token, no certificate configured)
// serves the Kubernetes API proxy over TLS with a certificate it makes and keeps; `kas kubeconfig
// --agent-id N` prints a kubeconfig, and `KUBECONFIG=... kubectl get pods` works through the tunnel
// in one step, before and after kas restarts (the same CA).
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parse } from "yaml";
import { buildKasConfig, ConfigError } from "../../../cmd/kas/config/index.ts";
import { kubeconfigFor, parseKubeconfigArgs } from "../../../cmd/kas/kubeconfig.ts";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type KasProcess, portsEnv, spawnKas } from "../../kas/support/kas-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { kubectlFor } from "../../support/kube/kubectl.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { exitCode, runMain } from "../../support/run-main.ts";

const MAIN = join(import.meta.dirname, "../../../cmd/kas/main.ts");

let dir: string;
let kube: KubeApiServer;
let env: Record<string, string>;
let kas: KasProcess | undefined;
let agent: InProcessAgentk | undefined;

async function startKas(): Promise<void> {
  kas = await spawnKas(env);
  agent = await startInProcessAgentk({
    kasUrl: kas.addresses.agent,
    token: TOKEN,
    kubernetes: await kube.writeKubeconfig(join(dir, "agentk-kubeconfig")),
  });
  await agent.agent.client.ready(10_000);
}

async function stopKas(): Promise<void> {
  await agent?.stop();
  kas?.child.kill("SIGTERM");
  await kas?.exitCode();
}

/** `kas kubeconfig` with kas's own environment. */
async function kasKubeconfig(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = runMain(MAIN, ["kubeconfig", ...args], env);
  const code = await exitCode(child);
  return { code, out: child.out(), err: child.err() };
}

async function kubectlGetPods(kubeconfig: string) {
  const k = await kubectlFor({ writeKubeconfig: (path) => writeFile(path, kubeconfig).then(() => path) });
  try {
    return await k.run(["get", "pods", "-n", "default"]);
  } finally {
    await k.close();
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-newcomer-"));
  kube = await startKubeApiServer();
  kube.store.create("pods", "default", {
    metadata: { name: "hello" },
    spec: { containers: [{ name: "main", image: "busybox" }] },
    status: { phase: "Running" },
  });
  await writeFile(join(dir, "tokens.yaml"), `${TOKEN}: {agentId: 42, projectId: 7, agentName: prod}\n`);
  env = {
    ...portsEnv(),
    KAS_AGENT_STATIC_TOKENS_FILE: join(dir, "tokens.yaml"),
    KAS_DATA_DIR: join(dir, "data"),
    // The default, spelled out: the test helpers otherwise ask for plain HTTP.
    KAS_AGENT_KUBERNETES_API_LISTEN_PLAINTEXT: "false",
  };
  await startKas();
}, 30_000);
afterAll(async () => {
  await stopKas();
  await kube?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("kas kubeconfig, then kubectl", () => {
  test("TLS by default with kas's own CA; the printed kubeconfig works in one step; the CA survives a restart", async () => {
    expect(kas!.addresses.kubernetesApi).toMatch(/^https:\/\//);
    const first = await kasKubeconfig(["--agent-id", "42", "--server", kas!.addresses.kubernetesApi]);
    expect(first.code, first.err).toBe(0);
    const doc = parse(first.out);
    const ca = doc.clusters[0].cluster["certificate-authority-data"];
    expect(Buffer.from(ca, "base64").toString()).toBe(
      await readFile(join(dir, "data/kubernetes_api/gen-1/ca.crt"), "utf8"),
    );
    expect(doc.users[0].user.token).toBe(TOKEN);
    const pods = await kubectlGetPods(first.out);
    expect(pods.code, pods.stderr).toBe(0);
    expect(pods.stdout).toMatch(/^hello\s+\S+\s+Running/m);

    await stopKas();
    await startKas();
    // The same command, in this process this time (a process start costs seconds here).
    const again = await kubeconfigFor(
      { agentId: "42", server: kas!.addresses.kubernetesApi },
      buildKasConfig({}, env),
    );
    expect(parse(again).clusters[0].cluster["certificate-authority-data"]).toBe(ca);
    const after = await kubectlGetPods(again);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toMatch(/^hello\s/m);
  }, 60_000);

  test("an agent without a static token, a bad agent id: errors that say what to give", async () => {
    const config = buildKasConfig({}, env);
    await expect(kubeconfigFor({ agentId: "99", server: "https://127.0.0.1:1" }, config)).rejects.toThrow(
      "agent 99 has no token in agent.static_tokens_file: give --token (ci:99:<CI job token>",
    );
    expect(() => parseKubeconfigArgs(["--agent-id", "x"])).toThrow(ConfigError);
    expect(() => parseKubeconfigArgs(["--agent-id", "x"])).toThrow("--agent-id: expected a positive integer");
    // A token given: any agent, e.g. a CI job's.
    const given = parse(
      await kubeconfigFor({ agentId: "99", server: "https://k", token: "ci:99:job" }, config),
    );
    expect(given.users[0].user.token).toBe("ci:99:job");
  });
});
