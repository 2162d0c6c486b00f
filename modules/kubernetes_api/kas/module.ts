// The Kubernetes API proxy's kas half: its own listener (8154), where users and CI jobs reach an
// agent's cluster; requests go over the agent's tunnel to the module's agentk half.
import { type KasModuleFactory, listenerModule, Phase } from "../../runtime/index.ts";
import type { AuthorizeProxyRequest } from "./access.ts";
import type { KubernetesApiConfig } from "./config.ts";
import { serveKubernetesProxy } from "./proxy-server.ts";

export function kubernetesApiModule(
  config: KubernetesApiConfig,
  authorize: AuthorizeProxyRequest,
): KasModuleFactory {
  // A front: it starts last and stops first (no new requests; those in flight get the grace period).
  return listenerModule("kubernetes_api", Phase.front, "kubernetesApi", ({ log, requests, agentHttp }) =>
    serveKubernetesProxy({
      listen: config.listen,
      urlPathPrefix: config.urlPathPrefix,
      authorize,
      proxy: agentHttp,
      metrics: requests,
      log,
    }),
  );
}
