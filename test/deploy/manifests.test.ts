// deploy/: the Kubernetes manifests of kas and agentk, built by the real kubectl's kustomize and
// applied to the Kubernetes test server, which validates every field against the kinds' schemas
// (fieldValidation=Strict, as kubectl asks), in every combination of their components. Their
// configuration goes through the daemons' own loaders.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { cp, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { loadAgentkConfig } from "../../cmd/agentk/config/index.ts";
import { buildKasConfig, parseYaml } from "../../cmd/kas/config/index.ts";
import { type Kubectl, kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../support/kube-apiserver.ts";
import { closedPort } from "../support/ports.ts";
import { until } from "../support/until.ts";

const AGENTK = "deploy/agentk";
const AGENTK_BASE = "deploy/agentk/base";
const KAS = "deploy/kas";
const PROXY_EXAMPLE = "deploy/examples/agentk-https-proxy";

/** Every choice of agentk's components (deploy/README.md): GitOps' reach x the informer's reads x impersonation. */
const AGENTK_CHOICES: string[][] = [[], ["gitops"], ["gitops-namespaced"]].flatMap((gitops) =>
  [[], ["read-only"]].flatMap((reads) =>
    [[], ["impersonate"], ["impersonate", "impersonate-any-group"]].map((imp) => [
      ...gitops,
      ...reads,
      ...imp,
    ]),
  ),
);
const KAS_CHOICES: string[][] = [[], ["cert-manager"], ["ingress"], ["cert-manager", "ingress"]];

let kube: KubeApiServer;
let kubectl: Kubectl;
let dir: string;

beforeAll(async () => {
  kube = await startKubeApiServer();
  kubectl = await kubectlFor(kube);
  dir = await mkdtemp(join(tmpdir(), "deploy-"));
  // As the operator does first (deploy/README.md): the namespaces, then the Secrets in them.
  for (const path of [AGENTK_BASE, KAS]) await ok(["apply", "-f", `${path}/namespace.yaml`]);
  // cert-manager's kinds, as its installation defines them (the test server checks no custom schema).
  for (const [plural, kind] of [
    ["certificates", "Certificate"],
    ["issuers", "Issuer"],
  ])
    await ok(["apply", "-f", "-"], stringify(crd("cert-manager.io", plural, kind)));
});
afterAll(async () => {
  await kubectl?.close();
  await kube?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function crd(group: string, plural: string, kind: string) {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: { plural, singular: kind.toLowerCase(), kind },
      versions: [
        { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object" } } },
      ],
    },
  };
}

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl.run(args, input === undefined ? {} : { input });
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

/** An overlay of `base` with `components` (folders under `<daemon>/components`), in `namespace`. */
async function overlay(
  base: string,
  daemon: string,
  components: string[],
  namespace: string,
): Promise<string> {
  const at = await mkdtemp(join(dir, "overlay-"));
  await writeFile(
    join(at, "kustomization.yaml"),
    stringify({
      namespace,
      resources: [relative(at, base)],
      components: components.map((c) => relative(at, join(daemon, "components", c))),
    }),
  );
  return at;
}

const choices = [
  ...[AGENTK, KAS, PROXY_EXAMPLE].map((path) => ({ name: path, path: async () => path })),
  ...AGENTK_CHOICES.map((c) => ({
    name: `agentk base + [${c.join(", ")}]`,
    path: () => overlay(AGENTK_BASE, AGENTK, c, "gitlab-agent"),
  })),
  ...KAS_CHOICES.map((c) => ({
    name: `kas + [${c.join(", ")}]`,
    path: () => overlay(KAS, KAS, c, "gitlab-kas"),
  })),
];

describe.each(choices)("$name", ({ path: make }) => {
  test("is accepted by a server dry run, client-side and server-side apply", async () => {
    const path = await make();
    const objects = await build(path);
    const seen = kube.requests.length;
    const client = await ok(["apply", "--dry-run=server", "-k", path]);
    const server = await ok(["apply", "--server-side", "--dry-run=server", "-k", path]);
    for (const o of objects) {
      const line = `${o.kind.toLowerCase()}(\\.[a-z0-9.-]+)?/${o.metadata.name}`;
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

test("the overlays deploy/README.md shows build and are accepted by a server dry run", async () => {
  const readme = await readFile("deploy/README.md", "utf8");
  const overlays = [...readme.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .filter((y) => y.includes("kind: Kustomization"));
  expect(overlays.length).toBeGreaterThanOrEqual(2);
  for (const yaml of overlays) {
    // As in the README, the overlay sits beside a copy of deploy/.
    const at = await mkdtemp(join(dir, "readme-"));
    await writeFile(
      join(at, "kustomization.yaml"),
      yaml.replaceAll("../deploy/", `${relative(at, "deploy")}/`),
    );
    const objects = await build(at);
    expect(objects.length).toBeGreaterThan(5);
    await ok(["apply", "--dry-run=server", "-k", at]);
  }
});

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

  /** The Secret volume mounted at the directory holding `file`, and the key `file` names in it. */
  function secretOf(file: string | undefined): { secretName: string; key: string } {
    const spec = podSpec(find(objects, "Deployment", "kas"));
    for (const mount of container.volumeMounts as Any[]) {
      if (!file?.startsWith(`${mount.mountPath}/`)) continue;
      const volume = spec.volumes.find((v: Any) => v.name === mount.name);
      if (volume.secret)
        return { secretName: volume.secret.secretName, key: file.slice(mount.mountPath.length + 1) };
    }
    throw new Error(`${file} is in no mounted Secret`);
  }

  test("every secret file the configuration names is a key of a mounted Secret", () => {
    const config = kasConfig();
    const files = [
      config.gitlab.authenticationSecretFile,
      config.api.listen.authenticationSecretFile,
      config.privateApi.listen.authenticationSecretFile,
      config.redis.passwordFile,
    ];
    expect(new Set(files.map((f) => JSON.stringify(secretOf(f))))).toEqual(
      new Set(
        ["gitlab-authentication-secret", "private-api-authentication-secret", "redis-password"].map((key) =>
          JSON.stringify({ secretName: "kas-secrets", key }),
        ),
      ),
    );
    // Redis reads its password from the same Secret's file.
    const redis = podSpec(find(objects, "Deployment", "redis"));
    const volume = redis.volumes.find((v: Any) => v.secret);
    expect(volume.secret).toMatchObject({ secretName: "kas-secrets", items: [{ key: "redis-password" }] });
    expect(config.redis.server.address).toEqual({ host: "redis", port: 6379 });
    expect(find(objects, "Service", "redis")).toBeDefined();
  });

  test("the Kubernetes API proxy's certificate: one Secret for every replica, the one cert-manager's Certificate makes", async () => {
    const listen = kasConfig().agent.kubernetesApi.listen;
    expect(listen.plaintext).toBe(false);
    const cert = secretOf(listen.certificateFile);
    const key = secretOf(listen.keyFile);
    // A kubernetes.io/tls Secret's keys, as cert-manager and `kubectl create secret tls` write them.
    expect([cert.key, key.key]).toEqual(["tls.crt", "tls.key"]);
    expect(key.secretName).toBe(cert.secretName);
    const withCertManager = await build(await overlay(KAS, KAS, ["cert-manager"], "gitlab-kas"));
    const certificate = withCertManager.find(
      (o) => o.kind === "Certificate" && (o.spec as Any).secretName === cert.secretName,
    );
    expect(certificate, `a Certificate writing ${cert.secretName}`).toBeDefined();
    // It names the proxy's Service, in kas's namespace.
    const service = find(objects, "Service", "kas-kubernetes-api");
    expect((certificate!.spec as Any).dnsNames).toContain(
      `${service.metadata.name}.${service.metadata.namespace}.svc`,
    );
  });

  test("data_dir is a volume of its own, the only writable path: the root filesystem is read-only", () => {
    const config = kasConfig();
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    const mount = (container.volumeMounts as Any[]).find((m) => m.mountPath === config.dataDir);
    expect(mount, `a volume at data_dir (${config.dataDir})`).toBeDefined();
    expect(mount.readOnly ?? false).toBe(false);
    const volume = podSpec(find(objects, "Deployment", "kas")).volumes.find(
      (v: Any) => v.name === mount.name,
    );
    expect(volume.emptyDir).toBeDefined();
    const writable = (container.volumeMounts as Any[]).filter((m) => !m.readOnly);
    expect(writable.map((m) => m.mountPath)).toEqual([config.dataDir]);
  });

  test("the Ingress example sends the agents' host to kas-agent, its timeouts above both sides' keepalive pings", async () => {
    const withIngress = await build(await overlay(KAS, KAS, ["ingress"], "gitlab-kas"));
    const ingress = find(withIngress, "Ingress");
    const backend = (ingress.spec as Any).rules[0].http.paths[0].backend.service;
    const service = find(objects, "Service", backend.name);
    expect((service.spec as Any).ports.map((p: Any) => p.name)).toContain(backend.port.name);
    expect(service.metadata.name).toBe("kas-agent");
    const annotations = ingress.metadata.annotations as Record<string, string>;
    // kas pings a tunnel quiet for keepalive_interval; agentk pings after 55 s of quiet.
    const quietS = Math.max(kasConfig().agent.listen.keepaliveIntervalMs / 1000, 55);
    for (const name of ["proxy-read-timeout", "proxy-send-timeout"])
      expect(Number(annotations[`nginx.ingress.kubernetes.io/${name}`]), name).toBeGreaterThan(quietS);
  });

  test("Redis takes its password from the Secret's file, never from a command line", async () => {
    const redis = podSpec(find(objects, "Deployment", "redis")).containers[0];
    const at = (path: string) => (redis.volumeMounts as Any[]).find((m) => m.mountPath === path);
    const [shell, flag, script] = redis.command as string[];
    expect([shell, flag]).toEqual(["sh", "-c"]);
    // The script as the container runs it: its mounts here, the redis-server it starts on a free port.
    const root = await mkdtemp(join(dir, "redis-"));
    const secretsPath = (redis.volumeMounts as Any[]).find((m) => m.readOnly).mountPath as string;
    const password = "pAss+w0rd/from=the-Secret";
    await mkdir(join(root, "secrets"));
    await mkdir(join(root, "data"));
    await writeFile(join(root, "secrets", "redis-password"), `${password}\n`);
    expect(at("/data")).toBeDefined();
    const port = await closedPort();
    await mkdir(join(root, "bin"));
    // Only this test's additions: where to listen (the image's redis listens on 6379 of its own pod).
    await writeFile(
      join(root, "bin", "redis-server"),
      `#!/bin/sh\nPATH='${process.env.PATH}' exec redis-server "$@" --port ${port} --bind 127.0.0.1\n`,
      { mode: 0o755 },
    );
    const child = spawn(
      "sh",
      [
        "-c",
        script!.replaceAll(secretsPath, join(root, "secrets")).replaceAll("/data/", `${join(root, "data")}/`),
      ],
      { env: { PATH: `${join(root, "bin")}:${process.env.PATH}` }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d;
    });
    try {
      const cli = (...args: string[]) =>
        new Promise<string>((resolve) => {
          const c = spawn("redis-cli", ["-p", String(port), "--no-auth-warning", ...args]);
          let out = "";
          c.stdout.on("data", (d: Buffer) => {
            out += d;
          });
          c.on("close", () => resolve(out.trim()));
        });
      await until(() => out.includes("Ready to accept connections"), 20_000, "Redis ready");
      expect(await cli("-a", password, "ping")).toBe("PONG");
      expect(await cli("ping")).toContain("NOAUTH");
      expect(await cli("-a", "wrong", "ping")).toMatch(/NOAUTH|WRONGPASS/);
      const cmdline = await readFile(`/proc/${child.pid}/cmdline`, "utf8");
      expect(cmdline).not.toContain(password);
      expect((await stat(join(root, "data", "redis.conf"))).mode & 0o077).toBe(0);
    } finally {
      child.kill("SIGKILL");
      await once(child as ChildProcess, "close");
    }
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

  test("two replicas, its own ServiceAccount, bound to every role the default components define", () => {
    expect((deployment.spec as Any).replicas).toBe(2);
    const account = find(objects, "ServiceAccount").metadata.name;
    expect(podSpec(deployment).serviceAccountName).toBe(account);
    const roles = objects.filter((o) => o.kind === "ClusterRole" || o.kind === "Role");
    expect(roles.map((r) => r.metadata.name).sort()).toEqual([
      "agentk-gitops",
      "agentk-leader-election",
      "agentk-views",
    ]);
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

  test("a PodDisruptionBudget lets one replica at a time go", () => {
    const pdb = find(objects, "PodDisruptionBudget");
    expect((pdb.spec as Any).maxUnavailable).toBe(1);
    expect((deployment.spec as Any).template.metadata.labels).toMatchObject(
      (pdb.spec as Any).selector.matchLabels,
    );
  });

  test("an overlay in another namespace moves the ServiceAccount and every binding's subject with it", async () => {
    const moved = await build(
      await overlay(AGENTK_BASE, AGENTK, ["gitops-namespaced", "read-only", "impersonate"], "elsewhere"),
    );
    expect(find(moved, "ServiceAccount").metadata.namespace).toBe("elsewhere");
    const bindings = moved.filter((o) => o.kind.endsWith("Binding"));
    const subjects = bindings.flatMap((b) => b.subjects as Any[]);
    expect(subjects).toHaveLength(4);
    for (const s of subjects) expect(s.namespace).toBe("elsewhere");
    for (const b of bindings.filter((b) => b.kind === "RoleBinding"))
      expect(b.metadata.namespace).toBe("elsewhere");
  });

  describe("RBAC, by component", () => {
    /** Whether any rule of the objects' roles bound to agentk lets it `verb` `resource` (named `name`) cluster-wide or in `namespace`. */
    function allows(
      built: KubeObject[],
      o: { group: string; resource: string; verb: string; name?: string; namespace?: string },
    ): boolean {
      const bound = built.filter((b) => b.kind.endsWith("Binding"));
      return bound.some((b) => {
        if (b.kind === "RoleBinding" && b.metadata.namespace !== o.namespace) return false;
        const ref = b.roleRef as Any;
        const role = built.find((r) => r.kind === ref.kind && r.metadata.name === ref.name);
        return ((role?.rules as Any[]) ?? []).some(
          (r) =>
            (r.apiGroups.includes(o.group) || r.apiGroups.includes("*")) &&
            (r.resources.includes(o.resource) || r.resources.includes("*")) &&
            (r.verbs.includes(o.verb) || r.verbs.includes("*")) &&
            (r.resourceNames === undefined || (o.name !== undefined && r.resourceNames.includes(o.name))),
        );
      });
    }
    const withComponents = async (components: string[]) =>
      build(await overlay(AGENTK_BASE, AGENTK, components, "gitlab-agent"));

    test("the base: leases in its own namespace, nothing else", async () => {
      const base = await withComponents([]);
      for (const verb of ["get", "create", "update"])
        expect(
          allows(base, { group: "coordination.k8s.io", resource: "leases", verb, namespace: "gitlab-agent" }),
        ).toBe(true);
      expect(allows(base, { group: "", resource: "pods", verb: "list", namespace: "gitlab-agent" })).toBe(
        false,
      );
      expect(allows(base, { group: "", resource: "users", verb: "impersonate" })).toBe(false);
    });

    test("read-only: the informer cache's reads and no write", async () => {
      const reads = await withComponents(["read-only"]);
      for (const [group, resource] of [
        ["", "nodes"],
        ["", "pods"],
        ["", "events"],
        ["apps", "deployments"],
        ["apps", "statefulsets"],
        ["apps", "daemonsets"],
        ["apps", "replicasets"],
      ] as const)
        for (const verb of ["list", "watch"])
          expect(allows(reads, { group, resource, verb }), `${resource} ${verb}`).toBe(true);
      for (const verb of ["create", "update", "patch", "delete"])
        expect(allows(reads, { group: "", resource: "pods", verb })).toBe(false);
    });

    test("gitops: any kind anywhere; gitops-namespaced: agentk's namespace only", async () => {
      const cluster = await withComponents(["gitops"]);
      const namespaced = await withComponents(["gitops-namespaced"]);
      for (const verb of ["get", "list", "create", "update", "patch", "delete"]) {
        expect(allows(cluster, { group: "", resource: "configmaps", verb, namespace: "team-a" })).toBe(true);
        expect(allows(cluster, { group: "rbac.authorization.k8s.io", resource: "clusterroles", verb })).toBe(
          true,
        );
        expect(
          allows(namespaced, { group: "apps", resource: "deployments", verb, namespace: "gitlab-agent" }),
        ).toBe(true);
        expect(
          allows(namespaced, { group: "apps", resource: "deployments", verb, namespace: "team-a" }),
        ).toBe(false);
        expect(allows(namespaced, { group: "", resource: "namespaces", verb })).toBe(false);
      }
    });

    test("impersonate: GitLab's identities, never a system:* group; impersonate-any-group adds every group", async () => {
      const gitlab = await withComponents(["impersonate"]);
      for (const resource of ["users", "serviceaccounts"])
        expect(allows(gitlab, { group: "", resource, verb: "impersonate", name: "gitlab:ci_job:1" })).toBe(
          true,
        );
      expect(allows(gitlab, { group: "authentication.k8s.io", resource: "uids", verb: "impersonate" })).toBe(
        true,
      );
      expect(
        allows(gitlab, {
          group: "authentication.k8s.io",
          resource: "userextras/agent.gitlab.com/ci_job_id",
          verb: "impersonate",
        }),
      ).toBe(true);
      for (const name of ["gitlab:ci_job", "gitlab:user"])
        expect(allows(gitlab, { group: "", resource: "groups", verb: "impersonate", name })).toBe(true);
      for (const name of ["system:masters", "system:nodes", "system:serviceaccounts"])
        expect(allows(gitlab, { group: "", resource: "groups", verb: "impersonate", name }), name).toBe(
          false,
        );
      const any = await withComponents(["impersonate", "impersonate-any-group"]);
      expect(
        allows(any, { group: "", resource: "groups", verb: "impersonate", name: "gitlab:project:7" }),
      ).toBe(true);
      expect(
        allows(any, { group: "", resource: "groups", verb: "impersonate", name: "system:masters" }),
      ).toBe(true);
    });
  });
});

describe("every daemon's pods", () => {
  let built: KubeObject[];
  beforeAll(async () => {
    built = [...(await build(KAS)), ...(await build(AGENTK))];
  });
  const deployments = () => built.filter((o) => o.kind === "Deployment");

  test("their namespaces enforce Pod Security's restricted profile, and every pod meets it", () => {
    for (const ns of built.filter((o) => o.kind === "Namespace"))
      expect(ns.metadata.labels).toMatchObject({ "pod-security.kubernetes.io/enforce": "restricted" });
    for (const d of deployments()) {
      const spec = podSpec(d);
      const name = d.metadata.name;
      expect(spec.securityContext.runAsNonRoot, name).toBe(true);
      expect(spec.securityContext.runAsUser, name).toBeGreaterThan(0);
      expect(spec.securityContext.seccompProfile, name).toEqual({ type: "RuntimeDefault" });
      for (const v of spec.volumes ?? [])
        expect(
          Object.keys(v).filter((k) => k !== "name"),
          `${name}: ${v.name}`,
        ).toEqual([
          expect.stringMatching(/^(configMap|secret|emptyDir|projected|downwardAPI|persistentVolumeClaim)$/),
        ]);
      expect(spec.hostNetwork ?? false).toBe(false);
      for (const c of spec.containers) {
        expect(c.securityContext, `${name}/${c.name}`).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        });
        expect(c.securityContext.capabilities.add ?? [], `${name}/${c.name}`).toEqual([]);
        expect(c.ports?.every((p: Any) => p.hostPort === undefined) ?? true).toBe(true);
      }
    }
  });

  test("a service-account token only where the Kubernetes API is called (agentk)", () => {
    for (const d of deployments()) {
      const spec = podSpec(d);
      if (d.metadata.name === "agentk") expect(spec.automountServiceAccountToken ?? true).toBe(true);
      else expect(spec.automountServiceAccountToken, d.metadata.name).toBe(false);
    }
  });

  test("no secret in an environment variable or on a command line: Secrets are mounted files", () => {
    for (const d of deployments())
      for (const c of podSpec(d).containers) {
        for (const e of c.env ?? [])
          expect(e.valueFrom?.secretKeyRef, `${d.metadata.name} ${e.name}`).toBeUndefined();
        expect(c.envFrom ?? [], d.metadata.name).toEqual([]);
      }
  });

  test("a NetworkPolicy per daemon selects its pods and opens only ports the pods name", () => {
    for (const d of deployments()) {
      const labels = (d.spec as Any).template.metadata.labels;
      const policy = built.find(
        (p) =>
          p.kind === "NetworkPolicy" &&
          p.metadata.namespace === d.metadata.namespace &&
          Object.entries((p.spec as Any).podSelector.matchLabels).every(([k, v]) => labels[k] === v),
      );
      expect(policy, `a NetworkPolicy for ${d.metadata.name}`).toBeDefined();
      const named = podSpec(d).containers.flatMap((c: Any) => c.ports.map((p: Any) => p.name));
      for (const rule of (policy!.spec as Any).ingress)
        for (const p of rule.ports) expect(named).toContain(p.port);
    }
    // Only kas replicas reach the private API.
    const kas = find(built, "NetworkPolicy", "kas");
    const privateRule = (kas.spec as Any).ingress.find((r: Any) =>
      r.ports.some((p: Any) => p.port === "private-api"),
    );
    expect(privateRule.from).toEqual([{ podSelector: { matchLabels: { "app.kubernetes.io/name": "kas" } } }]);
  });
});
