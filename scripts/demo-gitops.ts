// The demo's GitOps half, used only against the stand-in cluster (the Kubernetes API test server in
// the demo's process): a manifest project in local git, and what the demo prints of the objects
// agentk applied (read back through kas's Kubernetes API proxy) and of kas's GitOps API.
import { fetch } from "undici";

/** The manifest project's full path, as the agent configuration and the static tokens file name it. */
export const MANIFEST_PROJECT = "demo/manifests";
export const NAMESPACE_FILE = "manifests/namespace.yaml";
export const CONFIGMAP_FILE = "manifests/configmap.yaml";

export const namespaceYaml = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n";
export const configMapYaml = (greeting: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\n  namespace: demo\ndata:\n  greeting: ${JSON.stringify(greeting)}\n`;

/** The `gitops` section of the demo agent's configuration. */
export const gitopsConfigYaml = `gitops:\n  manifest_projects:\n    - id: ${MANIFEST_PROJECT}\n      paths:\n        - glob: "**/*.yaml"\n`;

const short = (commit: unknown) => String(commit).slice(0, 8);

interface KubeObject {
  metadata?: {
    name?: string;
    annotations?: Record<string, string>;
    managedFields?: Array<{ manager?: string }>;
  };
  data?: Record<string, string>;
  message?: string;
}

/** One line per object: GET through kas's Kubernetes API proxy with the agent's token. */
export async function showObjects(kubernetesApi: string, agentToken: string): Promise<string[]> {
  const lines: string[] = [];
  for (const path of ["/api/v1/namespaces/demo", "/api/v1/namespaces/demo/configmaps/greeting"]) {
    const res = await fetch(`${kubernetesApi}${path}`, {
      headers: { authorization: `Bearer ${agentToken}` },
    });
    const body = (await res.json()) as KubeObject;
    const managers = [...new Set(body.metadata?.managedFields?.map((f) => f.manager))].join(", ");
    const shown = !res.ok
      ? body.message
      : `${body.data ? `data ${JSON.stringify(body.data)}, ` : ""}field manager ${managers || "none"}`;
    lines.push(`GET ${path} -> ${res.status}: ${shown}`);
  }
  return lines;
}

interface GitopsStatus {
  manifest_projects: Array<{
    project: string;
    last_sent: { commitId: string; files: number; bytes: number } | null;
    last_sync: {
      commitId: string;
      counts: Record<string, number>;
      objects: Array<{ kind: string; namespace: string; name: string; status: string }>;
      error?: string;
    } | null;
    last_error: { source: string; message: string } | null;
  }>;
}

/** kas's `GET /api/v1/agents/1/gitops`, one line per project (and sync). */
export async function showGitops(api: string, headers: Record<string, string>): Promise<string[]> {
  const path = "/api/v1/agents/1/gitops";
  const res = await fetch(`${api}${path}`, { headers });
  if (!res.ok) return [`GET ${path} -> ${res.status}: ${await res.text()}`];
  const body = (await res.json()) as GitopsStatus;
  if (body.manifest_projects.length === 0) return [`GET ${path} -> ${res.status}: no manifest projects yet`];
  return body.manifest_projects.map(({ project, last_sent: sent, last_sync: sync, last_error: error }) => {
    const sentText = sent
      ? `sent ${short(sent.commitId)} (${sent.files} files, ${sent.bytes} bytes)`
      : "nothing sent";
    const objects = sync?.objects
      .map((o) => `${o.kind} ${o.namespace ? `${o.namespace}/` : ""}${o.name} ${o.status}`)
      .join(", ");
    const syncText = sync
      ? `; synced ${short(sync.commitId)}: ${objects}${sync.error ? ` (${sync.error})` : ""}`
      : "";
    const errorText = error ? `; last error (${error.source}): ${error.message}` : "";
    return `GET ${path} -> ${res.status}: ${project}: ${sentText}${syncText}${errorText}`;
  });
}
