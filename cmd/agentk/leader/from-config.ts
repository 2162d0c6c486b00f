import { hostname } from "node:os";
import { loadKubeConfig } from "../../../modules/kubernetes_api/agentk/kubeconfig.ts";
import type { AgentkConfig } from "../config/index.ts";
import type { Logger } from "../observability/index.ts";
import { LeaseElector } from "./lease-elector.ts";

/**
 * The agent's leader election: a Lease in agentk's namespace named after the agent (its token's
 * fingerprint: the same for every replica of the agent, different for every agent, no secret), held
 * by this pod. Undefined without a Kubernetes configuration (then there is one replica).
 */
export async function createLeaseElector(
  config: AgentkConfig,
  log: Logger,
): Promise<LeaseElector | undefined> {
  if (config.kubernetes.kind === "none") return undefined;
  const { kc } = await loadKubeConfig(config.kubernetes);
  if (config.kubernetes.kind === "in-cluster") {
    // The service account's token, re-read as it rotates (client-node's token-file provider).
    kc.users[0] = {
      name: "service-account",
      authProvider: { name: "tokenFile", config: { tokenFile: config.kubernetes.tokenFile } },
    };
  }
  const { CoordinationV1Api } = await import("@kubernetes/client-node");
  return new LeaseElector({
    api: kc.makeApiClient(CoordinationV1Api),
    namespace: config.pod.namespace ?? "default",
    name: `agentk-${config.token.fingerprint}`,
    identity: config.pod.name ?? hostname(),
    log,
  });
}
