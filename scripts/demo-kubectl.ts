// The demo's kubectl, as a newcomer would use it: kas serves its Kubernetes API proxy over TLS with
// a certificate it made (under its data_dir); `kas kubeconfig --agent-id 1` prints a kubeconfig
// (the proxy's URL, kas's CA, the dev token); then `KUBECONFIG=... kubectl get pods -A`.
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { Agent, setGlobalDispatcher } from "undici";
import { parse } from "yaml";

const run = promisify(execFile);

/** Runs `kas kubeconfig` with kas's environment, writes the kubeconfig to `path`; the demo's own requests then trust kas's CA too. */
export async function kasKubeconfig(
  root: string,
  env: Record<string, string>,
  server: string,
  path: string,
): Promise<void> {
  const { stdout } = await run(
    process.execPath,
    ["--import", "tsx", join(root, "cmd/kas/main.ts"), "kubeconfig", "--agent-id", "1", "--server", server],
    { env: { ...process.env, ...env } },
  );
  await writeFile(path, stdout, { mode: 0o600 });
  const ca = parse(stdout).clusters[0].cluster["certificate-authority-data"] as string | undefined;
  if (ca) setGlobalDispatcher(new Agent({ connect: { ca: Buffer.from(ca, "base64").toString() } }));
}

/** `KUBECONFIG=<path> kubectl get pods -A`'s lines, or why it could not run. */
export async function kubectlGetPods(path: string): Promise<string[]> {
  try {
    const { stdout, stderr } = await run("kubectl", ["get", "pods", "-A"], {
      env: { ...process.env, KUBECONFIG: path },
      timeout: 20_000,
    });
    // "No resources found" comes on stderr.
    return (stdout.trim() || stderr.trim()).split("\n");
  } catch (err) {
    const e = err as { code?: string; stderr?: string; message: string };
    return [e.code === "ENOENT" ? "kubectl is not installed" : (e.stderr?.trim() ?? e.message)];
  }
}
