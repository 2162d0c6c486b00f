// How the proxy's listener serves: the configured certificate, plain HTTP when asked, or else the
// certificate kas makes and keeps (certificate.ts).
import { homedir } from "node:os";
import { join } from "node:path";
import { ensureCertificate } from "./certificate.ts";
import type { KubernetesApiConfig } from "./config.ts";

export interface ProxyTls {
  certificateFile?: string;
  keyFile?: string;
  /** The CA a kubeconfig must trust: set when kas made the certificate. */
  caFile?: string;
}

/** kas's data directory: data_dir, else $XDG_STATE_HOME/gitlab-kas, else ~/.local/state/gitlab-kas. */
export function kasDataDir(configured: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (configured !== undefined) return configured;
  return join(env.XDG_STATE_HOME || join(homedir(), ".local", "state"), "gitlab-kas");
}

export async function proxyTls(config: KubernetesApiConfig, dataDir: string): Promise<ProxyTls> {
  const { certificateFile, keyFile, plaintext, address } = config.listen;
  if (certificateFile !== undefined && keyFile !== undefined) return { certificateFile, keyFile };
  if (plaintext) return {};
  const host = address.host;
  const specific = host !== undefined && !["", "0.0.0.0", "::"].includes(host);
  return ensureCertificate(dataDir, { extraNames: specific ? [host] : [] });
}
