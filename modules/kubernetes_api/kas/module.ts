// The Kubernetes API proxy's kas half: its own listener (8154), where users and CI jobs reach an
// agent's cluster; requests go over the agent's tunnel to the module's agentk half.
import { type KasModuleFactory, listenerModule, Phase } from "../../runtime/index.ts";
import { authorizeProxyRequest, type ProxyAuthorizationOptions } from "./authorize.ts";
import type { KubernetesApiConfig } from "./config.ts";
import type { CorsPolicy } from "./cors.ts";
import { serveKubernetesProxy } from "./proxy-server.ts";

export interface KubernetesApiAccess extends Omit<ProxyAuthorizationOptions, "configurations"> {
  cors?: CorsPolicy;
}

export function kubernetesApiModule(
  config: KubernetesApiConfig,
  access: KubernetesApiAccess,
): KasModuleFactory {
  // A front: it starts last and stops first (no new requests; those in flight get the grace period).
  return listenerModule(
    "kubernetes_api",
    Phase.front,
    "kubernetesApi",
    ({ log, requests, agentHttp, configurations }) =>
      serveKubernetesProxy({
        listen: config.listen,
        urlPathPrefix: config.urlPathPrefix,
        authorize: authorizeProxyRequest({ ...access, configurations }),
        proxy: agentHttp,
        metrics: requests,
        ...(access.cors && { cors: access.cors }),
        log,
      }),
  );
}
