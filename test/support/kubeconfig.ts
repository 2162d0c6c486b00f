import { writeFile } from "node:fs/promises";
import { stringify } from "yaml";

export interface KubeconfigInit {
  server: string;
  /** PEM of the CA that signed the server's certificate. */
  caCert?: string;
  token?: string;
  /** A client certificate and key (PEM) for the user: kubectl then needs no token and prompts for none. */
  clientCertificate?: { cert: string; key: string };
  /** client-node refuses a plain-HTTP server unless this is set. */
  insecureSkipTlsVerify?: boolean;
  namespace?: string;
  /** Context, cluster and user name. Default "test". */
  name?: string;
}

/** A kubeconfig with one cluster, one token user and one context, as kubectl writes them. */
export function kubeconfigYaml(init: KubeconfigInit): string {
  const name = init.name ?? "test";
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name,
        cluster: {
          server: init.server,
          ...(init.caCert && { "certificate-authority-data": Buffer.from(init.caCert).toString("base64") }),
          ...(init.insecureSkipTlsVerify && { "insecure-skip-tls-verify": true }),
        },
      },
    ],
    users: [
      {
        name,
        user: {
          ...(init.token && { token: init.token }),
          ...(init.clientCertificate && {
            "client-certificate-data": Buffer.from(init.clientCertificate.cert).toString("base64"),
            "client-key-data": Buffer.from(init.clientCertificate.key).toString("base64"),
          }),
        },
      },
    ],
    contexts: [
      { name, context: { cluster: name, user: name, ...(init.namespace && { namespace: init.namespace }) } },
    ],
    "current-context": name,
  });
}

export async function writeKubeconfig(path: string, init: KubeconfigInit): Promise<string> {
  await writeFile(path, kubeconfigYaml(init), { mode: 0o600 });
  return path;
}
