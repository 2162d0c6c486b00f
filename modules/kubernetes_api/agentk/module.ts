// The Kubernetes API proxy's agentk half: serves `kubernetes` streams from kas with agentk's own
// credentials; without a Kubernetes configuration such streams are refused as UNAVAILABLE.

import type { AgentkModuleFactory } from "../../runtime/index.ts";
import { KUBERNETES_SERVICE, Phase } from "../../runtime/index.ts";
import { createKubernetesProxy } from "./forwarder.ts";
import type { KubeConfigSource } from "./kube-config-source.ts";

export function kubernetesApiAgentModule(source: KubeConfigSource): AgentkModuleFactory {
  return {
    name: "kubernetes_api",
    phase: Phase.capability,
    async create({ log, requests, httpServices }) {
      const forwarder = await createKubernetesProxy(source, {
        log,
        track: () => requests.start(KUBERNETES_SERVICE),
      });
      if (forwarder) httpServices.add(KUBERNETES_SERVICE, forwarder);
      else httpServices.unavailable(KUBERNETES_SERVICE, "no Kubernetes configuration");
      log.info(
        { kubernetes: source.kind },
        forwarder
          ? "serving the Kubernetes API"
          : "no Kubernetes configuration; the Kubernetes API is not served",
      );
      return { name: "kubernetes_api" };
    },
  };
}
