// Allow-listed in-cluster HTTP services (e.g. Prometheus): kas reaches them by name, nothing else.
import * as http from "node:http";
import * as https from "node:https";
import { createForwarder, type Forwarder, type ForwarderOptions } from "../../../tool/http/proxy/index.ts";
import type { AllowedService } from "./allowed-services.ts";

/** A forwarder per allow-listed service, by name. Requests pass through as kas sent them. */
export function createServiceProxies(
  services: readonly AllowedService[],
  options: (name: string) => Omit<ForwarderOptions, "errorBody">,
): Map<string, Forwarder> {
  const proxies = new Map<string, Forwarder>();
  for (const { name, url } of services) {
    const target = new URL(url);
    const agent =
      target.protocol === "https:"
        ? new https.Agent({ keepAlive: true })
        : new http.Agent({ keepAlive: true });
    const forwarder = createForwarder(
      { url: target, prepare: (headers) => ({ agent, headers }), destroy: () => agent.destroy() },
      {
        ...options(name),
        errorBody: (_code, message) => ({ contentType: "text/plain; charset=utf-8", body: `${message}\n` }),
      },
    );
    proxies.set(name, forwarder);
  }
  return proxies;
}
