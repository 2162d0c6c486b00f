// Observability, the same in both daemons: Prometheus metrics and the liveness and readiness
// probes on their own listener, up before every other module and down after them.
import type { Registry } from "prom-client";
import type { ListenAddress } from "../../tool/config/values.ts";
import type { ConnectionLimits } from "../../tool/http/serve/index.ts";
import { type Logger, type ReadinessChecks, serveObservability } from "../../tool/observability/index.ts";
import { listenerModule, type ModuleFactory, Phase } from "../runtime/index.ts";

export interface ObservabilityConfig {
  listen: ListenAddress;
  /** Defaults: /metrics, /liveness, /readiness (GitLab's names). */
  paths?: { metrics?: string; liveness?: string; readiness?: string };
  /** Default `DEFAULT_CONNECTION_LIMITS` (agentk has no setting for them). */
  limits?: ConnectionLimits;
}

/** What the module needs of either daemon's dependencies. */
export interface ObservabilityDeps {
  log: Logger;
  registry: Registry;
  readiness: ReadinessChecks;
}

export function observabilityModule(config: ObservabilityConfig): ModuleFactory<ObservabilityDeps> {
  return listenerModule(
    "observability",
    Phase.observability,
    "observability",
    async ({ log, registry, readiness }, signal) => {
      // Not ready from the moment the daemon starts stopping; the probes stay up until the end.
      signal.addEventListener("abort", () =>
        readiness.add("shutdown", () => {
          throw new Error("shutting down");
        }),
      );
      const server = await serveObservability({
        listen: config.listen,
        registry,
        readiness,
        log,
        ...(config.paths && { paths: config.paths }),
        ...(config.limits && { limits: config.limits }),
      });
      return { url: server.url, close: () => server.close() };
    },
  );
}
