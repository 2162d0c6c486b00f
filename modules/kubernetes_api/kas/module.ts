// The Kubernetes API proxy's kas half: its own listener (8154), where users and CI jobs reach an
// agent's cluster; requests go over the agent's tunnel to the module's agentk half.
import { type KasModuleFactory, listenerModule, Phase } from "../../runtime/index.ts";
import { authorizeProxyRequest, type ProxyAuthorizationOptions } from "./authorize.ts";
import type { KubernetesApiConfig } from "./config.ts";
import type { CorsPolicy } from "./cors.ts";
import { proxyTls } from "./listener-tls.ts";
import { serveKubernetesProxy } from "./proxy-server.ts";

export interface KubernetesApiAccess extends Omit<ProxyAuthorizationOptions, "configurations"> {
  cors?: CorsPolicy;
}

/** `dataDir`: where kas keeps the certificate it makes when none is configured. */
export function kubernetesApiModule(
  config: KubernetesApiConfig,
  access: KubernetesApiAccess,
  dataDir: string,
): KasModuleFactory {
  // A front: it starts last and stops first (no new requests; those in flight get the grace period).
  return listenerModule(
    "kubernetes_api",
    Phase.front,
    "kubernetesApi",
    async ({ log, requests, agentHttp, configurations }) => {
      const tls = await proxyTls(config, dataDir);
      if (tls.caFile)
        log.info({ caFile: tls.caFile }, "Kubernetes API proxy: TLS with kas's own certificate");
      return serveKubernetesProxy({
        listen: { ...config.listen, ...tls },
        urlPathPrefix: config.urlPathPrefix,
        authorize: authorizeProxyRequest({ ...access, configurations }),
        proxy: agentHttp,
        metrics: requests,
        ...(access.cors && { cors: access.cors }),
        log,
      });
    },
  );
}
