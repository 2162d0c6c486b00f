// The Dockerfile, built by buildah (Debian's, as root, overlay storage, chroot isolation: no daemon, no
// privileges beyond root) into the kas and agentk images, which are then run as an engine would:
// their entrypoint, their user. No container registry is reachable here, so the base image is made
// from this machine's own node (node-base-image.sh) and passed as NODE_IMAGE; the npm registry is
// reachable, and the build installs from it as it would anywhere.
// Then both run as deploy/'s manifests run them (run-pod.ts): two kas replicas and an agentk, each in
// a pod network namespace of its own, read-only root filesystem, the manifests' user, volumes and
// environment, against stand-ins for GitLab, Redis and the Kubernetes API behind Service addresses.
import { execFile } from "node:child_process";
import { randomBytes, X509Certificate } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { promisify } from "node:util";
import { generate } from "selfsigned";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parseAllDocuments } from "yaml";
import { GitLabApiServer } from "../support/gitlab-api.ts";
import { kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../support/kube-apiserver.ts";
import { RedisServer } from "../support/redis-server.ts";
import { until } from "../support/until.ts";
import { PodNetwork } from "./pod-network.ts";
import { type RunningPod, runPod } from "./run-pod.ts";

const run = promisify(execFile);
const BASE = "localhost/node-base:test";
const IMAGES = { kas: "localhost/kas:test", agentk: "localhost/agentk:test" } as const;

let root: string;
let storage: string[];

const buildah = (args: string[], timeoutMs = 60_000) =>
  run("buildah", [...storage, ...args], { timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 << 20 });

/** Runs a command in a container of `image` (its user, its working directory). */
async function inImage(image: string, command: string[]) {
  const { stdout: ctr } = await buildah(["from", "--quiet", image]);
  try {
    return await buildah(["run", "--isolation", "chroot", ctr.trim(), "--", ...command]);
  } finally {
    await buildah(["rm", ctr.trim()]);
  }
}

interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  User?: string;
  WorkingDir?: string;
  ExposedPorts?: Record<string, object>;
}

async function configOf(image: string): Promise<ImageConfig> {
  const { stdout } = await buildah(["inspect", "--type", "image", image]);
  return (JSON.parse(stdout) as { OCIv1: { config: ImageConfig } }).OCIv1.config;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "images-"));
  storage = ["--storage-driver", "overlay", "--root", join(root, "root"), "--runroot", join(root, "run")];
  await run("bash", ["test/deploy/node-base-image.sh", BASE, ...storage], { timeout: 60_000 });
  for (const [target, tag] of Object.entries(IMAGES)) {
    // --layers: the second target reuses the stages the first one built.
    await buildah(
      ["bud", "--layers", "--isolation", "chroot", "--build-arg", `NODE_IMAGE=${BASE}`].concat([
        "--target",
        target,
        "--tag",
        tag,
        ".",
      ]),
      240_000,
    );
  }
}, 300_000);
afterAll(async () => {
  if (!root) return;
  await buildah(["rm", "--all"]).catch(() => undefined);
  await rm(root, { recursive: true, force: true });
}, 60_000);

describe.each(Object.entries(IMAGES))("the %s image", (daemon, image) => {
  test("its entrypoint is node on the compiled daemon, in exec form, as a user that is not root", async () => {
    const config = await configOf(image);
    expect(config.Entrypoint).toEqual(["node", `dist/cmd/${daemon}/main.js`]);
    expect(config.Cmd ?? []).toEqual([]);
    expect(config.User).toBe("1000:1000");
    const { stdout } = await inImage(image, ["node", "-p", "process.getuid() + ' ' + process.cwd()"]);
    expect(stdout.trim()).toBe(`1000 ${config.WorkingDir}`);
  });

  test("--help runs from dist/ with the production dependencies", async () => {
    const { Entrypoint } = await configOf(image);
    const { stdout } = await inImage(image, [...Entrypoint!, "--help"]);
    expect(stdout).toMatch(new RegExp(`^Usage: ${daemon} `));
  });

  test("holds production dependencies only, and no TypeScript sources", async () => {
    const check = `const fs = require("node:fs");
      const has = (p) => fs.existsSync(p);
      console.log(JSON.stringify({
        ws: has("node_modules/ws"), grpc: has("node_modules/@grpc/grpc-js"),
        typescript: has("node_modules/typescript"), vitest: has("node_modules/vitest"), biome: has("node_modules/@biomejs"),
        sources: has("cmd") || has("lib") || has("modules"), proto: has("dist/proto/gen"),
        protoSources: has("dist/proto/agent_tracker/v1/gitlab_rpc.proto") && has("dist/proto/gitaly/shared.proto"),
        dashboard: has("dist/modules/dashboard/web/app.js") && has("dist/modules/dashboard/web/app.css"),
        esbuild: has("node_modules/esbuild"),
      }))`;
    const { stdout } = await inImage(image, ["node", "-e", check]);
    expect(JSON.parse(stdout)).toEqual({
      ws: true,
      grpc: true,
      typescript: false,
      vitest: false,
      biome: false,
      sources: false,
      proto: true,
      protoSources: true,
      dashboard: true,
      esbuild: false,
    });
  });
});

test("the images expose the ports the manifests name", async () => {
  expect(Object.keys((await configOf(IMAGES.agentk)).ExposedPorts ?? {})).toEqual(["8080/tcp"]);
  expect(Object.keys((await configOf(IMAGES.kas)).ExposedPorts ?? {}).sort()).toEqual(
    ["8150/tcp", "8151/tcp", "8153/tcp", "8154/tcp", "8155/tcp"].sort(),
  );
});

/** A CA and a certificate it signed for `names`: what cert-manager's Certificate (deploy/kas/components/cert-manager) puts in its Secret. */
async function tlsSecret(names: string[]): Promise<Record<string, string>> {
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + 24 * 3600_000);
  const ca = await generate([{ name: "commonName", value: "kas Kubernetes API proxy CA" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const cert = await generate([{ name: "commonName", value: names[0]! }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: names.map((n) => (/^[\d.]+$/.test(n) ? { type: 7, ip: n } : { type: 2, value: n })),
      },
    ],
  });
  return { "tls.crt": cert.cert, "tls.key": cert.private, "ca.crt": ca.cert };
}

/** The objects a kustomization makes, as the real kubectl's kustomize prints them. */
async function kustomize(path: string): Promise<KubeObject[]> {
  const { stdout } = await run("kubectl", ["kustomize", path], { timeout: 60_000 });
  return parseAllDocuments(stdout).map((d) => d.toJS() as KubeObject);
}

const deploymentOf = (objects: KubeObject[], name: string) =>
  objects.find((o) => o.kind === "Deployment" && o.metadata.name === name)!;

/** The status of GET `url`, or the error's code. */
async function status(url: string): Promise<number | string> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).status;
  } catch (err) {
    return String((err as { cause?: { code?: string } }).cause?.code ?? err);
  }
}

/** The certificate a TLS server at host:port presents, trusting `ca`. */
async function servedCertificate(
  host: string,
  port: number,
  ca: string,
  servername: string,
): Promise<string> {
  const socket = connect({ host, port, ca, servername });
  try {
    await once(socket, "secureConnect");
    return socket.getPeerX509Certificate()!.fingerprint256;
  } finally {
    socket.destroy();
  }
}

describe("both daemons as the manifests run them: read-only root filesystem, not root, the manifests' volumes and environment", () => {
  const TOKEN = "glagent-images-test-token-0123456789";
  const mounted: string[] = [];
  const pods: RunningPod[] = [];
  let network: PodNetwork | undefined;
  let redis: RedisServer | undefined;
  let gitlab: GitLabApiServer | undefined;
  let kube: KubeApiServer | undefined;
  let proxyTls: Record<string, string>;
  let kasPods: { ip: string; pod: RunningPod }[];
  let agentk: { ip: string; pod: RunningPod };

  /** A container's root filesystem from `image`, as a runtime unpacks it. */
  async function rootfs(image: string): Promise<string> {
    const { stdout: ctr } = await buildah(["from", "--quiet", image]);
    mounted.push(ctr.trim());
    return (await buildah(["mount", ctr.trim()])).stdout.trim();
  }

  beforeAll(async () => {
    const kasObjects = await kustomize("deploy/kas");
    const agentkObjects = await kustomize("deploy/agentk");
    const kasDeployment = deploymentOf(kasObjects, "kas");
    const agentkDeployment = deploymentOf(agentkObjects, "agentk");
    const gitlabSecret = randomBytes(32);
    const redisPassword = randomBytes(24).toString("base64");
    redis = await RedisServer.start({ args: ["--requirepass", redisPassword] });
    gitlab = await GitLabApiServer.start({
      secret: new Uint8Array(gitlabSecret),
      agents: { [TOKEN]: { agentId: 7, projectId: 3, agentName: "images-test" } },
    });
    kube = await startKubeApiServer();
    // agentk's objects in the cluster, as `kubectl apply -k deploy/agentk` makes them (its namespace
    // holds the leader-election Lease).
    const kubectl = await kubectlFor(kube);
    try {
      const applied = await kubectl.run(["apply", "-k", "deploy/agentk"]);
      if (applied.code !== 0) throw new Error(applied.stderr);
    } finally {
      await kubectl.close();
    }
    network = await PodNetwork.create();
    // The Services the manifests name (kas.yaml: redis:6379, GitLab's webservice:8181).
    const gitlabUrl = new URL(gitlab.url);
    const hosts = {
      redis: await network.addService(6379, { host: redis.host, port: redis.port }),
      "gitlab-webservice-default.gitlab.svc": await network.addService(8181, {
        host: gitlabUrl.hostname,
        port: Number(gitlabUrl.port),
      }),
    };
    const kubeUrl = new URL(kube.url);
    const kubernetesService = await network.addService(443, {
      host: kubeUrl.hostname,
      port: Number(kubeUrl.port),
    });
    // The API server's certificate names the Service address in-cluster clients dial.
    const kubeTls = await tlsSecret(["kubernetes.default.svc", kubernetesService]);
    kube.useCertificate({ cert: kubeTls["tls.crt"]!, key: kubeTls["tls.key"]! });
    proxyTls = await tlsSecret(["kas-kubernetes-api.gitlab-kas.svc"]);
    const secrets = {
      "kas-secrets": {
        "gitlab-authentication-secret": gitlabSecret.toString("base64"),
        "private-api-authentication-secret": randomBytes(32).toString("base64"),
        "redis-password": redisPassword,
      },
      "kas-kubernetes-api-tls": proxyTls,
      "agentk-token": { token: TOKEN },
    };
    const kasImage = await configOf(IMAGES.kas);
    kasPods = [];
    for (const name of ["kas-0", "kas-1"]) {
      const pod = await network.addPod(name);
      kasPods.push({
        ip: pod.ip,
        pod: await runPod({
          objects: kasObjects,
          deployment: kasDeployment,
          secrets,
          rootfs: await rootfs(IMAGES.kas),
          image: kasImage,
          pod,
          hosts,
          dir: root,
        }),
      });
    }
    pods.push(...kasPods.map((k) => k.pod));
    const agentkPod = await network.addPod("agentk-0");
    agentk = {
      ip: agentkPod.ip,
      pod: await runPod({
        objects: agentkObjects,
        deployment: agentkDeployment,
        secrets,
        rootfs: await rootfs(IMAGES.agentk),
        image: await configOf(IMAGES.agentk),
        pod: agentkPod,
        hosts,
        kubernetes: { host: kubernetesService, port: 443, caCert: kubeTls["ca.crt"]!, token: kube.token },
        dir: root,
        // deploy/README.md, agentk step 3: --kas-address is kas's agent endpoint (here kas-0's pod).
        args: (args) =>
          args.map((a) => (a.startsWith("--kas-address=") ? `--kas-address=ws://${kasPods[0]!.ip}:8150` : a)),
      }),
    };
    pods.push(agentk.pod);
  }, 120_000);

  afterAll(async () => {
    for (const pod of pods) await pod.kill();
    await network?.close();
    for (const ctr of mounted) await buildah(["rm", ctr]).catch(() => undefined);
    await kube?.close();
    await gitlab?.close();
    await redis?.close();
  }, 60_000);

  const logs = () => pods.map((p, i) => `--- pod ${i}\n${p.output()}`).join("\n");

  test("both kas replicas become ready (Redis connected through its Service, with the password from the Secret's file)", async () => {
    for (const { ip } of kasPods)
      await until(
        async () => (await status(`http://${ip}:8151/readiness`)) === 200,
        60_000,
        `kas at ${ip} ready\n${logs()}`,
      );
    // Still running: readiness answered from a process that went on to start every listener.
    for (const { pod } of kasPods) expect(pod.process.exitCode, logs()).toBe(null);
  }, 70_000);

  test("both serve the Kubernetes API proxy with the Secret's certificate: one certificate for every replica", async () => {
    const expected = new X509Certificate(proxyTls["tls.crt"]!).fingerprint256;
    for (const { ip } of kasPods)
      expect(
        await servedCertificate(ip, 8154, proxyTls["ca.crt"]!, "kas-kubernetes-api.gitlab-kas.svc"),
      ).toBe(expected);
  }, 20_000);

  test("agentk becomes ready: its tunnel to kas is up, authenticated by GitLab with the token from its Secret", async () => {
    await until(
      async () => (await status(`http://${agentk.ip}:8080/readiness`)) === 200,
      60_000,
      `agentk ready\n${logs()}`,
    );
    expect(gitlab!.requests.some((r) => r.path.endsWith("/agent_info") && r.status === 200)).toBe(true);
  }, 70_000);

  test("kas wrote nothing to data_dir (the certificate is the Secret's)", async () => {
    for (const { pod } of kasPods) expect(await readdir(pod.volumes.data!)).toEqual([]);
  });

  test("each daemon runs as the manifests' user and fsGroup, without capabilities, on a read-only root", async () => {
    for (const pod of pods) {
      // run-container.sh becomes unshare, whose one child is the entrypoint (PID 1 of its namespace).
      const parent = pod.process.pid!;
      const [pid] = (await readFile(`/proc/${parent}/task/${parent}/children`, "utf8")).trim().split(" ");
      const status = await readFile(`/proc/${pid}/status`, "utf8");
      const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, "m").exec(status)?.[1]?.trim();
      expect(field("Name")).toBe("node");
      expect(field("Uid")?.split(/\s+/)).toEqual(["1000", "1000", "1000", "1000"]);
      expect(field("Gid")?.split(/\s+/)).toEqual(["1000", "1000", "1000", "1000"]);
      expect(field("Groups")).toBe("1000");
      expect(field("CapEff")).toBe("0000000000000000");
      expect(field("CapPrm")).toBe("0000000000000000");
      expect(field("NoNewPrivs")).toBe("1");
      // Its root directory's mount: options read-only (mountinfo's 6th field).
      const mounts = (await readFile(`/proc/${pid}/mountinfo`, "utf8")).trim().split("\n");
      const rootMount = mounts.map((l) => l.split(" ")).find((f) => f[4] === "/");
      expect(rootMount?.[5]?.split(",")).toContain("ro");
    }
  });
});
