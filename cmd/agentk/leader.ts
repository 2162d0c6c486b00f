import { hostname } from "node:os";
import { agentkClientConfig } from "../../modules/kubernetes_api/agentk/kubeconfig.ts";
import { LeaseElector } from "../../modules/runtime/lease-elector.ts";
import type { AgentkConfig } from "./config/index.ts";
import type { Logger } from "./observability/index.ts";

/**
 * The agent's leader election: a Lease in agentk's namespace named after the agent (its token's
 * fingerprint: the same for every replica of the agent, different for every agent, no secret), held
 * by this pod. Undefined without a Kubernetes configuration (then there is one replica).
 */
export async function createLeaseElector(
  config: AgentkConfig,
  log: Logger,
): Promise<LeaseElector | undefined> {
  const kc = await agentkClientConfig(config.kubernetes);
  if (kc === undefined) return undefined;
  const { CoordinationV1Api } = await import("@kubernetes/client-node");
  return new LeaseElector({
    api: kc.makeApiClient(CoordinationV1Api),
    namespace: config.pod.namespace ?? "default",
    name: `agentk-${config.token.fingerprint}`,
    identity: config.pod.name ?? hostname(),
    log,
  });
}
