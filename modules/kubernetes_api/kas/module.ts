// The Kubernetes API proxy's kas half: its own listener (8154), where users and CI jobs reach an
// agent's cluster; requests go over the agent's tunnel to the module's agentk half.
import type { ListenConfig } from "../../../cmd/common/config/values.ts";
import type { HttpListener } from "../../../cmd/common/http/index.ts";
import { type KasModuleFactory, Phase } from "../../runtime/index.ts";
import type { AuthorizeProxyRequest } from "./access.ts";
import { serveKubernetesProxy } from "./proxy-server.ts";

export interface KubernetesApiConfig {
  listen: ListenConfig;
  /** Path prefix stripped before forwarding (agent.kubernetes_api.url_path_prefix). */
  urlPathPrefix: string;
}

export function kubernetesApiModule(
  config: KubernetesApiConfig,
  authorize: AuthorizeProxyRequest,
): KasModuleFactory {
  return {
    name: "kubernetes_api",
    phase: Phase.front,
    create({ log, requests, agentHttp }) {
      let listener: HttpListener | undefined;
      return {
        name: "kubernetes_api",
        get urls() {
          return listener ? { kubernetesApi: listener.url } : {};
        },
        async start() {
          listener = await serveKubernetesProxy({
            listen: config.listen,
            urlPathPrefix: config.urlPathPrefix,
            authorize,
            proxy: agentHttp,
            metrics: requests,
            log,
          });
        },
        // Fronts stop first (last phase): no new requests, those in flight get the grace period.
        close: async (graceMs) => listener?.close(graceMs),
      };
    },
  };
}
