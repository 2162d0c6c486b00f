// deploy/: the Kubernetes manifests of kas and agentk, built by the real kubectl's kustomize and
// applied to the Kubernetes test server, which validates every field against the kinds' schemas
// (fieldValidation=Strict, as kubectl asks). Their configuration goes through the daemons' own loaders.
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parseAllDocuments } from "yaml";
import { loadAgentkConfig } from "../../cmd/agentk/config/index.ts";
import { buildKasConfig, parseYaml } from "../../cmd/kas/config/index.ts";
import { type Kubectl, kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../support/kube-apiserver.ts";

const AGENTK = "deploy/agentk";
const KAS = "deploy/kas";
const PROXY_EXAMPLE = "deploy/examples/agentk-https-proxy";

let kube: KubeApiServer;
let kubectl: Kubectl;
let dir: string;

beforeAll(async () => {
  kube = await startKubeApiServer();
  kubectl = await kubectlFor(kube);
  dir = await mkdtemp(join(tmpdir(), "deploy-"));
  // As the operator does first (deploy/README.md): the namespaces, then the Secrets in them.
  for (const path of [AGENTK, KAS]) await ok(["apply", "-f", `${path}/namespace.yaml`]);
});
afterAll(async () => {
  await kubectl?.close();
  await kube?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function ok(args: string[]): Promise<string> {
  const r = await kubectl.run(args);
  expect(r.code, `kubectl ${args.join(" ")}: ${r.stderr}`).toBe(0);
  expect(r.stderr, "no warnings (an unknown field is one)").toBe("");
  return r.stdout;
}

/** The objects a kustomization makes, as `kubectl kustomize` prints them. */
async function build(path: string): Promise<KubeObject[]> {
  return parseAllDocuments(await ok(["kustomize", path])).map((d) => d.toJS() as KubeObject);
}

function find(objects: KubeObject[], kind: string, name?: string): KubeObject {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (!found) throw new Error(`no ${kind} ${name ?? ""} in ${objects.map((o) => o.kind).join(", ")}`);
  return found;
}

// biome-ignore lint/suspicious/noExplicitAny: a Deployment's pod spec, read as the YAML says it
type Any = any;
const podSpec = (deployment: KubeObject): Any => (deployment.spec as Any).template.spec;

describe.each([AGENTK, KAS, PROXY_EXAMPLE])("%s", (path) => {
  test("is accepted by a server dry run, client-side and server-side apply", async () => {
    const objects = await build(path);
    const seen = kube.requests.length;
    const client = await ok(["apply", "--dry-run=server", "-k", path]);
    const server = await ok(["apply", "--server-side", "--dry-run=server", "-k", path]);
    for (const o of objects) {
      const line = `${o.kind.toLowerCase()}(\\.[a-z0-9.]+)?/${o.metadata.name}`;
      expect(client).toMatch(new RegExp(`^${line} (created|unchanged) \\(server dry run\\)$`, "m"));
      expect(server).toMatch(new RegExp(`^${line} serverside-applied \\(server dry run\\)$`, "m"));
    }
    // Every write asked the server to refuse unknown fields (so the server checked them all).
    const writes = kube.requests.slice(seen).filter((r) => r.method !== "GET");
    expect(writes.length).toBeGreaterThanOrEqual(2 * objects.length);
    for (const w of writes) expect(w.path).toContain("fieldValidation=Strict");
  });
});

/** deploy/kas with `from` replaced by `to` in one file: both applies refuse it, naming `refusal`. */
async function refusedWith(file: string, from: string, to: string, refusal: string): Promise<void> {
  const copy = await mkdtemp(join(dir, "kas-typo-"));
  await cp(KAS, copy, { recursive: true });
  const text = await readFile(join(copy, file), "utf8");
  expect(text).toContain(from);
  await writeFile(join(copy, file), text.replace(from, to));
  for (const args of [["apply"], ["apply", "--server-side"]]) {
    const r = await kubectl.run([...args, "--dry-run=server", "-k", copy]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(refusal);
  }
}

test("a typo in a field or a kind is refused", async () => {
  await refusedWith(
    "deployment.yaml",
    "terminationGracePeriodSeconds:",
    "terminationGracePeriodSecond:",
    "spec.template.spec.terminationGracePeriodSecond",
  );
  await refusedWith(
    "pdb.yaml",
    "kind: PodDisruptionBudget",
    "kind: PodDisruptionBuget",
    'no matches for kind "PodDisruptionBuget" in version "policy/v1"',
  );
});

test("applied for real (client-side kas, server-side agentk with the proxy example): the objects are stored", async () => {
  await ok(["apply", "-k", KAS]);
  await ok(["apply", "--server-side", "-k", PROXY_EXAMPLE]);
  const agentk = kube.store.get("deployments", "gitlab-agent", "agentk");
  expect((agentk.spec as Any).replicas).toBe(2);
  const env = podSpec(agentk).containers[0].env.map((e: Any) => e.name);
  expect(env).toEqual(expect.arrayContaining(["POD_NAME", "POD_NAMESPACE", "HTTPS_PROXY", "NO_PROXY"]));
  expect(kube.store.has("poddisruptionbudgets", "gitlab-kas", "kas")).toBe(true);
  expect(kube.store.list("services", "gitlab-kas").map((s) => s.metadata.name)).toHaveLength(6);
});

describe("kas", () => {
  let objects: KubeObject[];
  let container: Any;
  beforeAll(async () => {
    objects = await build(KAS);
    container = podSpec(find(objects, "Deployment", "kas")).containers[0];
  });

  /** kas's configuration as the pod sees it: the ConfigMap's file and the container's environment. */
  function kasConfig() {
    const configMap = find(objects, "ConfigMap");
    const downward: Record<string, string> = { "status.podIP": "10.1.2.3" };
    const env: Record<string, string> = {};
    for (const e of container.env) {
      env[e.name] =
        e.value?.replace(/\$\((\w+)\)/g, (_: string, v: string) => env[v]) ??
        downward[e.valueFrom.fieldRef.fieldPath];
    }
    const file = Object.keys(configMap.data as object)[0]!;
    return buildKasConfig(parseYaml((configMap.data as Any)[file], file), env, file);
  }

  test("its ConfigMap passes kas's configuration loader, and the Deployment mounts it at --config", () => {
    const config = kasConfig();
    expect(config.privateApi.ownUrl).toBe("ws://10.1.2.3:8155/");
    const configMap = find(objects, "ConfigMap");
    const volume = podSpec(find(objects, "Deployment", "kas")).volumes.find((v: Any) => v.configMap);
    expect(volume.configMap.name).toBe(configMap.metadata.name);
    const mount = container.volumeMounts.find((m: Any) => m.name === volume.name);
    expect(container.args).toEqual([
      "--config",
      `${mount.mountPath}/${Object.keys(configMap.data as object)[0]}`,
    ]);
  });

  test("every secret file the configuration names is a key of the mounted Secret", () => {
    const config = kasConfig();
    const files = [
      config.gitlab.authenticationSecretFile,
      config.api.listen.authenticationSecretFile,
      config.privateApi.listen.authenticationSecretFile,
      config.redis.passwordFile,
    ];
    const volume = podSpec(find(objects, "Deployment", "kas")).volumes.find((v: Any) => v.secret);
    const mount = container.volumeMounts.find((m: Any) => m.name === volume.name);
    const keys = new Set(files.map((f) => f?.replace(`${mount.mountPath}/`, "")));
    expect([...keys].sort()).toEqual(
      ["gitlab-authentication-secret", "private-api-authentication-secret", "redis-password"].sort(),
    );
    // Redis takes its password from the same Secret.
    const redis = podSpec(find(objects, "Deployment", "redis")).containers[0];
    const ref = redis.env.find((e: Any) => e.name === "REDIS_PASSWORD").valueFrom.secretKeyRef;
    expect(ref).toEqual({ name: volume.secret.secretName, key: "redis-password" });
    expect(config.redis.server.address).toEqual({ host: "redis", port: 6379 });
    expect(find(objects, "Service", "redis")).toBeDefined();
  });

  test("one Service per listener, on the configured ports; probes on the observability listener", () => {
    const config = kasConfig();
    const listeners: Record<string, number | undefined> = {
      agent: config.agent.listen.address.port,
      observability: config.observability.listen.address.port,
      api: config.api.listen.address.port,
      "kubernetes-api": config.agent.kubernetesApi.listen.address.port,
      "private-api": config.privateApi.listen.address.port,
    };
    const ports = Object.fromEntries(container.ports.map((p: Any) => [p.name, p.containerPort]));
    expect(ports).toEqual(listeners);
    for (const name of Object.keys(listeners)) {
      const service = find(objects, "Service", `kas-${name}`.replace("kas-private-api", "kas-private"));
      expect((service.spec as Any).ports.map((p: Any) => p.targetPort)).toEqual([name]);
    }
    expect(container.readinessProbe.httpGet).toEqual({
      path: config.observability.readinessProbe.urlPath,
      port: "observability",
    });
    expect(container.livenessProbe.httpGet).toEqual({
      path: config.observability.livenessProbe.urlPath,
      port: "observability",
    });
    // Probes come from the kubelet, not from loopback.
    expect(config.observability.listen.address.host ?? "").toMatch(/^(0\.0\.0\.0|::|)$/);
  });

  test("terminationGracePeriodSeconds outlasts the preStop pause plus shutdown_grace_period", () => {
    const spec = podSpec(find(objects, "Deployment", "kas"));
    const pause = container.lifecycle?.preStop?.sleep?.seconds ?? 0;
    expect(spec.terminationGracePeriodSeconds).toBeGreaterThan(
      pause + kasConfig().shutdownGracePeriodMs / 1000,
    );
  });

  test("a PodDisruptionBudget selects the kas pods", () => {
    const pdb = find(objects, "PodDisruptionBudget");
    const labels = (find(objects, "Deployment", "kas").spec as Any).template.metadata.labels;
    expect(labels).toMatchObject((pdb.spec as Any).selector.matchLabels);
  });
});

describe("agentk", () => {
  let objects: KubeObject[];
  let deployment: KubeObject;
  let container: Any;
  beforeAll(async () => {
    objects = await build(AGENTK);
    deployment = find(objects, "Deployment", "agentk");
    container = podSpec(deployment).containers[0];
  });

  test("its arguments and environment pass agentk's configuration loader, the token read from the Secret's file", async () => {
    const volume = podSpec(deployment).volumes.find((v: Any) => v.secret);
    const mount = container.volumeMounts.find((m: Any) => m.name === volume.name);
    // The Secret's volume, here: a directory holding the key agentk reads.
    const tokenDir = join(dir, "token");
    const tokenArg = container.args.find((a: string) => a.startsWith("--token-file="));
    const key = tokenArg.slice(`--token-file=${mount.mountPath}/`.length);
    await mkdir(tokenDir, { recursive: true });
    await writeFile(join(tokenDir, key), "agent-token-from-the-secret\n");
    const downward: Record<string, string> = {
      "metadata.name": "agentk-7d9f-abcde",
      "metadata.namespace": "gitlab-agent",
    };
    const env: Record<string, string> = {};
    for (const e of container.env) env[e.name] = e.value ?? downward[e.valueFrom.fieldRef.fieldPath];
    const argv = container.args.map((a: string) => a.replace(mount.mountPath, tokenDir));
    const args = await loadAgentkConfig({ argv, env, serviceAccountDir: join(dir, "no-service-account") });
    if (args.help) throw new Error("--help");
    expect(args.config.token.reveal()).toBe("agent-token-from-the-secret");
    expect(args.config.pod).toEqual({ name: "agentk-7d9f-abcde", namespace: "gitlab-agent" });
    expect(args.config.kasAddress).toMatch(/^wss:\/\//);
    const port = container.ports.find((p: Any) => p.name === "observability").containerPort;
    expect(args.config.observability.listen.port).toBe(port);
    expect(container.livenessProbe.httpGet).toEqual({ path: "/liveness", port: "observability" });
    expect(container.readinessProbe.httpGet).toEqual({ path: "/readiness", port: "observability" });
  });

  test("two replicas, its own ServiceAccount, bound to every role the manifests define", () => {
    expect((deployment.spec as Any).replicas).toBe(2);
    const account = find(objects, "ServiceAccount").metadata.name;
    expect(podSpec(deployment).serviceAccountName).toBe(account);
    const roles = objects.filter((o) => o.kind === "ClusterRole" || o.kind === "Role");
    const bindings = objects.filter((o) => o.kind.endsWith("Binding"));
    for (const role of roles) {
      const binding = bindings.find(
        (b) => (b.roleRef as Any).name === role.metadata.name && (b.roleRef as Any).kind === role.kind,
      );
      expect(binding, role.metadata.name).toBeDefined();
      expect((binding as Any).subjects).toEqual([
        { kind: "ServiceAccount", name: account, namespace: deployment.metadata.namespace },
      ]);
    }
  });

  test("an overlay in another namespace moves the ServiceAccount and every binding's subject with it", async () => {
    const overlay = join(dir, "agentk-elsewhere");
    await mkdir(overlay, { recursive: true });
    await writeFile(
      join(overlay, "kustomization.yaml"),
      `namespace: elsewhere\nresources:\n  - ${relative(overlay, AGENTK)}\n`,
    );
    const moved = await build(overlay);
    expect(find(moved, "ServiceAccount").metadata.namespace).toBe("elsewhere");
    const subjects = moved.filter((o) => o.kind.endsWith("Binding")).flatMap((b) => b.subjects as Any[]);
    expect(subjects).toHaveLength(4);
    for (const s of subjects) expect(s.namespace).toBe("elsewhere");
  });

  test("RBAC: impersonation, leases, the informer cache's reads, GitOps' writes", () => {
    const rules = (name: string): Any[] => find(objects, "ClusterRole", name).rules as Any[];
    const allows = (rs: Any[], group: string, resource: string, verb: string) =>
      rs.some(
        (r) =>
          (r.apiGroups.includes(group) || r.apiGroups.includes("*")) &&
          (r.resources.includes(resource) || r.resources.includes("*")) &&
          (r.verbs.includes(verb) || r.verbs.includes("*")),
      );
    for (const resource of ["users", "groups", "serviceaccounts"])
      expect(allows(rules("agentk-impersonate"), "", resource, "impersonate")).toBe(true);
    const views = rules("agentk-views");
    for (const [group, resource] of [
      ["", "nodes"],
      ["", "pods"],
      ["", "events"],
      ["apps", "deployments"],
      ["apps", "statefulsets"],
      ["apps", "daemonsets"],
    ] as const)
      for (const verb of ["list", "watch"])
        expect(allows(views, group, resource, verb), `${resource} ${verb}`).toBe(true);
    for (const verb of ["get", "create", "update", "patch", "delete", "list"])
      expect(allows(rules("agentk-gitops"), "", "configmaps", verb)).toBe(true);
    const leases = find(objects, "Role", "agentk-leader-election").rules as Any[];
    for (const verb of ["get", "create", "update"])
      expect(allows(leases, "coordination.k8s.io", "leases", verb)).toBe(true);
  });
});
