// The service proxy's kas half: GitLab reaches an agent's allow-listed in-cluster services (e.g.
// Prometheus) through kas's API, over the agent's tunnel.
import { type KasModuleFactory, Phase } from "../../runtime/index.ts";
import { servicesRoute } from "./services-route.ts";

export function serviceProxyModule(): KasModuleFactory {
  return {
    name: "service_proxy",
    phase: Phase.capability,
    create({ agentHttp, api, log }) {
      api.add(servicesRoute(agentHttp, api.credentialHeaders, log));
      return { name: "service_proxy" };
    },
  };
}
