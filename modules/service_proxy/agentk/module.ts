// The service proxy's agentk half: the allow-listed in-cluster HTTP services (e.g. Prometheus)
// that kas may reach by name, nothing else.
import type { AgentkModuleFactory } from "../../runtime/index.ts";
import { Phase } from "../../runtime/index.ts";
import type { AllowedService } from "./allowed-services.ts";
import { createServiceProxies } from "./forwarders.ts";

export function serviceProxyAgentModule(services: readonly AllowedService[]): AgentkModuleFactory {
  return {
    name: "service_proxy",
    phase: Phase.capability,
    create({ log, requests, httpServices }) {
      const route = (name: string) => `service/${name}`;
      for (const [name, forwarder] of createServiceProxies(services, (name) => ({
        log,
        track: () => requests.start(route(name)),
      }))) {
        httpServices.add(name, forwarder);
      }
      if (services.length > 0)
        log.info({ services: services.map((s) => s.name) }, "serving allow-listed services");
      return { name: "service_proxy" };
    },
  };
}
