import { access, readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { flag } from "../../../tool/config/flags.ts";
import { parseString } from "../../../tool/config/values.ts";

/** The module's agentk flag; KUBECONFIG stands in for it as a `:`-separated list (see resolveKubeConfig). */
export const kubernetesApiAgentkFlags = z.object({
  kubeconfig: flag(parseString, {
    kind: "file path",
    env: "KUBECONFIG",
    doc: "kubeconfig file; default KUBECONFIG, then in-cluster configuration",
  }),
});

export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Where agentk's Kubernetes client gets its configuration. Resolution only: nothing is contacted. */
export type KubeConfigSource =
  /** --kubeconfig, or KUBECONFIG (several files, `:`-separated, merged by the client). */
  | { kind: "kubeconfig"; paths: string[] }
  /** Running in a pod: the API server from KUBERNETES_SERVICE_HOST/PORT, credentials from the service account. */
  | { kind: "in-cluster"; server: string; tokenFile: string; caFile: string }
  /** Neither: agentk runs without a Kubernetes API (the tunnel and allow-listed services still work). */
  | { kind: "none" };

export interface KubeConfigInputs {
  flag: string | undefined;
  env: NodeJS.ProcessEnv;
  serviceAccountDir: string;
}

/** The order kubectl and client-go use: explicit flag, then KUBECONFIG, then in-cluster. */
export async function resolveKubeConfig(
  inputs: KubeConfigInputs,
  fail: (field: string, message: string) => void,
): Promise<KubeConfigSource> {
  const { flag, env, serviceAccountDir } = inputs;
  if (flag !== undefined) {
    if (!(await exists(flag))) fail("--kubeconfig", `${flag} does not exist or is not readable`);
    return { kind: "kubeconfig", paths: [flag] } satisfies KubeConfigSource;
  }
  if (env.KUBECONFIG) {
    const paths = env.KUBECONFIG.split(":").filter((p) => p !== "");
    const found = [];
    for (const p of paths) if (await exists(p)) found.push(p);
    if (found.length === 0) fail("KUBECONFIG", `none of ${paths.join(", ")} exists`);
    return { kind: "kubeconfig", paths: found } satisfies KubeConfigSource;
  }
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host && port) {
    const tokenFile = join(serviceAccountDir, "token");
    const caFile = join(serviceAccountDir, "ca.crt");
    for (const file of [tokenFile, caFile]) {
      if (!(await exists(file))) {
        fail(
          "KUBERNETES_SERVICE_HOST",
          `set, so agentk runs in a pod, but ${file} is missing (is a service account token mounted?)`,
        );
      }
    }
    const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
    return { kind: "in-cluster", server, tokenFile, caFile } satisfies KubeConfigSource;
  }
  return { kind: "none" } satisfies KubeConfigSource;
}

/** POD_NAMESPACE, or in a pod the service account's namespace file. */
export async function podNamespace(
  env: NodeJS.ProcessEnv,
  serviceAccountDir: string,
): Promise<string | undefined> {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE;
  try {
    return (await readFile(join(serviceAccountDir, "namespace"), "utf8")).trim() || undefined;
  } catch {
    return undefined;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
