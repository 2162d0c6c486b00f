// agentk's observability: the same logger, probes and metrics server as kas (tool/), with
// agentk's metric names.
import { Counter, type Registry } from "prom-client";
import { createRegistry, RequestMetrics, TunnelMetrics } from "../../../tool/observability/index.ts";

export {
  type CheckResult,
  createLogger,
  type Logger,
  type ObservabilityServer,
  type ReadinessCheck,
  ReadinessChecks,
  serveObservability,
} from "../../../tool/observability/index.ts";

export interface AgentkMetrics {
  registry: Registry;
  /** agentk_tunnels, agentk_tunnel_open_streams, agentk_tunnel_{received,sent}_bytes_total. */
  tunnels: TunnelMetrics;
  /** agentk_request_duration_seconds{route,status}: requests kas made through the tunnel. */
  requests: RequestMetrics;
  /** agentk_stream_handler_errors_total{service}: streams kas opened that failed after agentk accepted them. */
  streamHandlerErrors: Counter<"service">;
}

export function createAgentkMetrics(registry: Registry = createRegistry("agentk")): AgentkMetrics {
  return {
    registry,
    tunnels: new TunnelMetrics(registry, "agentk", { countAgents: false }),
    requests: new RequestMetrics(registry, "agentk"),
    streamHandlerErrors: new Counter({
      name: "agentk_stream_handler_errors_total",
      help: "Streams kas opened whose handler failed after agentk accepted them, by service.",
      labelNames: ["service"],
      registers: [registry],
    }),
  };
}
