// A kubeconfig for an agent's cluster through kas's Kubernetes API proxy, ready for kubectl: the
// proxy's URL, the CA kas made for it (data_dir), a token. One function for `kas kubeconfig
// --agent-id N` and for GitLab's API (`GET /api/v1/agents/{agent_id}/kubeconfig`).
import { readFile } from "node:fs/promises";
import { stringify } from "yaml";
import type { KubernetesApiConfig } from "./config.ts";
import { proxyTls } from "./listener-tls.ts";

/** What the caller must supply (e.g. the proxy's URL when it cannot be derived), worded by each caller. */
export class KubeconfigError extends Error {
  override name = "KubeconfigError";

  constructor(
    readonly missing: "server",
    message: string,
  ) {
    super(message);
  }
}

export interface ProxyKubeconfigOptions {
  agentId: string;
  /** ci:N:<job token>, pat:N:<personal access token>, or a static dev token. */
  token: string;
  /** The proxy's URL as kubectl reaches it; default from `config.listen.address`. */
  server?: string;
  config: KubernetesApiConfig;
  /** Where kas keeps the proxy's certificate when none is configured. */
  dataDir: string;
}

/** The kubeconfig's YAML. */
export async function proxyKubeconfig(o: ProxyKubeconfigOptions): Promise<string> {
  const tls = await proxyTls(o.config, o.dataDir);
  const scheme = o.config.listen.plaintext && tls.certificateFile === undefined ? "http" : "https";
  const server = o.server ?? defaultServer(scheme, o.config.listen.address, o.config.urlPathPrefix);
  const name = `kas-agent-${o.agentId}`;
  const cluster: Record<string, string> = { server };
  if (tls.caFile)
    cluster["certificate-authority-data"] = Buffer.from(await readFile(tls.caFile)).toString("base64");
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name, cluster }],
    users: [{ name, user: { token: o.token } }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    "current-context": name,
  });
}

function defaultServer(
  scheme: string,
  address: { host: string | undefined; port: number },
  prefix: string,
): string {
  if (address.port === 0)
    throw new KubeconfigError("server", "agent.kubernetes_api.listen.address has port 0");
  const host =
    address.host === undefined || ["", "0.0.0.0", "::"].includes(address.host) ? "127.0.0.1" : address.host;
  const path = prefix.replace(/\/+$/, "");
  return `${scheme}://${host.includes(":") ? `[${host}]` : host}:${address.port}${path}`;
}
