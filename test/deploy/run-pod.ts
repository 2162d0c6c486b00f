// Runs a Deployment's pod from its manifest as the kubelet would, on this machine: each volume made as
// the kubelet makes it (a ConfigMap's or a Secret's keys as files, owned by root and the pod's
// fsGroup with the Secret's defaultMode; an emptyDir; the service-account token unless
// automountServiceAccountToken is false), /etc/hosts with the pod's name and the Services' names,
// the container's environment (downward API, $(VAR) references, the Kubernetes Service's variables),
// the image's entrypoint with the container's args, under the pod's securityContext through
// run-container.sh (read-only root filesystem, runAsUser/runAsGroup, fsGroup, no capabilities).
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { chmod, chown, mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { KubeObject } from "../support/kube-apiserver.ts";
import type { Pod } from "./pod-network.ts";

// biome-ignore lint/suspicious/noExplicitAny: pod specs, read as the YAML says them
type Any = any;

export interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  WorkingDir?: string;
}

export interface PodRun {
  /** The built objects the pod's ConfigMaps come from. */
  objects: KubeObject[];
  deployment: KubeObject;
  /** Secrets by name: key -> content. */
  secrets: Record<string, Record<string, string>>;
  /** The image's root filesystem (`buildah mount`) and configuration. */
  rootfs: string;
  image: ImageConfig;
  pod: Pod;
  /** Names the pod resolves (/etc/hosts): Services. */
  hosts: Record<string, string>;
  /** The API server as in-cluster clients find it (KUBERNETES_SERVICE_HOST/PORT) and the token's CA. */
  kubernetes?: { host: string; port: number; caCert: string; token: string };
  /** A directory of this test's for the volumes. */
  dir: string;
  /** Replaces the container's args (what the operator edits, e.g. --kas-address). */
  args?: (args: string[]) => string[];
}

export interface RunningPod {
  process: ChildProcess;
  output: () => string;
  /**
   * Ends the container: its entrypoint (PID 1 of its PID namespace, so everything in it goes), then
   * the runner. Killing the runner alone left the entrypoint running: unshare's kill-on-parent-death
   * is reset when the entrypoint drops to the pod's user.
   */
  kill(): Promise<void>;
  /** The host directory behind each volume, by name. */
  volumes: Record<string, string>;
}

const SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";

export async function runPod(o: PodRun): Promise<RunningPod> {
  const spec = (o.deployment.spec as Any).template.spec;
  const [container] = spec.containers as Any[];
  const security = spec.securityContext ?? {};
  const uid = container.securityContext?.runAsUser ?? security.runAsUser;
  const gid = container.securityContext?.runAsGroup ?? security.runAsGroup ?? uid;
  const fsGroup: number | undefined = security.fsGroup;
  if (uid === undefined) throw new Error("no runAsUser: this runner takes the user from the manifest");
  if (container.securityContext?.readOnlyRootFilesystem !== true)
    throw new Error("root filesystem not read-only");
  const podDir = await mkdtemp(join(o.dir, `${o.pod.name}-`));

  const volumes: Record<string, string> = {};
  for (const v of spec.volumes ?? []) {
    const at = join(podDir, v.name);
    await mkdir(at);
    volumes[v.name] = at;
    if (v.configMap) {
      const map = o.objects.find((x) => x.kind === "ConfigMap" && x.metadata.name === v.configMap.name);
      if (!map) throw new Error(`no ConfigMap ${v.configMap.name}`);
      await files(at, map.data as Record<string, string>, v.configMap, 0o644, fsGroup);
    } else if (v.secret) {
      const secret = o.secrets[v.secret.secretName];
      if (!secret) throw new Error(`no Secret ${v.secret.secretName}`);
      await files(at, secret, v.secret, 0o644, fsGroup);
    } else if (v.emptyDir) {
      // The kubelet makes it 0777 (setgid to fsGroup when there is one).
      if (fsGroup !== undefined) await chown(at, 0, fsGroup);
      await chmod(at, fsGroup !== undefined ? 0o2777 : 0o777);
    } else throw new Error(`volume ${v.name}: only configMap, secret and emptyDir are made here`);
  }
  const mounts: string[] = (container.volumeMounts ?? []).map(
    (m: Any) => `${volumes[m.name]}:${m.mountPath}:${m.readOnly ? "ro" : "rw"}`,
  );
  const env: Record<string, string> = {};
  for (const e of o.image.Env ?? []) {
    const i = e.indexOf("=");
    env[e.slice(0, i)] = e.slice(i + 1);
  }
  env.HOSTNAME = o.pod.name;
  if (o.kubernetes && spec.automountServiceAccountToken !== false) {
    const sa = join(podDir, "serviceaccount");
    await files(
      sa,
      {
        token: o.kubernetes.token,
        "ca.crt": o.kubernetes.caCert,
        namespace: o.deployment.metadata.namespace!,
      },
      { defaultMode: 0o644 },
      0o644,
      fsGroup,
    );
    mounts.push(`${sa}:${SERVICE_ACCOUNT}:ro`);
    env.KUBERNETES_SERVICE_HOST = o.kubernetes.host;
    env.KUBERNETES_SERVICE_PORT = String(o.kubernetes.port);
  }
  const downward: Record<string, string> = {
    "metadata.name": o.pod.name,
    "metadata.namespace": o.deployment.metadata.namespace!,
    "status.podIP": o.pod.ip,
  };
  const expand = (s: string) => s.replace(/\$\((\w+)\)/g, (ref, name: string) => env[name] ?? ref);
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = expand(e.value);
    else if (e.valueFrom?.fieldRef) env[e.name] = downward[e.valueFrom.fieldRef.fieldPath]!;
    else throw new Error(`env ${e.name}: only values and the downward API are resolved here`);
  }

  const hostsFile = join(podDir, "hosts");
  const hosts = { localhost: "127.0.0.1", [o.pod.name]: o.pod.ip, ...o.hosts };
  await writeFile(
    hostsFile,
    Object.entries(hosts)
      .map(([n, a]) => `${a}\t${n}\n`)
      .join(""),
  );
  mounts.push(`${hostsFile}:/etc/hosts:ro`);

  const args = (container.args ?? o.image.Cmd ?? []).map(expand);
  const command = [...(container.command ?? o.image.Entrypoint ?? []), ...(o.args ? o.args(args) : args)];
  const groups = [...new Set([gid, ...(fsGroup !== undefined ? [fsGroup] : [])])].join(",");
  const child = spawn(
    "test/deploy/run-container.sh",
    [
      o.pod.netns,
      o.rootfs,
      `${uid}:${gid}`,
      groups,
      o.pod.name,
      o.image.WorkingDir ?? "/",
      ...mounts,
      "--",
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      "--",
      ...command,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const collect = (d: Buffer) => {
    output = (output + d).slice(-64 * 1024);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const pid = child.pid!;
    const entrypoints = await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => "");
    for (const entrypoint of entrypoints.trim().split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(entrypoint), "SIGKILL");
      } catch {
        // already gone
      }
    }
    const exited = once(child, "exit");
    child.kill("SIGKILL");
    await exited;
  };
  return { process: child, output: () => output, volumes, kill };
}

/** A ConfigMap's or Secret's keys (or its `items`) as files, root-owned, group fsGroup, defaultMode. */
async function files(
  dir: string,
  data: Record<string, string>,
  source: { items?: { key: string; path: string }[]; defaultMode?: number },
  fallbackMode: number,
  fsGroup: number | undefined,
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const items = source.items ?? Object.keys(data).map((key) => ({ key, path: key }));
  for (const { key, path } of items) {
    const content = data[key];
    if (content === undefined) throw new Error(`no key ${key}`);
    const file = join(dir, path);
    await writeFile(file, content);
    await chown(file, 0, fsGroup ?? 0);
    await chmod(file, source.defaultMode ?? fallbackMode);
  }
}
