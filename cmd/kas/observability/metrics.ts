// kas's metrics: the shared tunnel and request metrics under "kas_", agent authentications, token
// re-checks and failed agent streams.
import { Counter, type Registry } from "prom-client";
import { createRegistry, RequestMetrics, TunnelMetrics } from "../../common/observability/index.ts";

export interface KasMetrics {
  registry: Registry;
  tunnels: TunnelMetrics;
  requests: RequestMetrics;
  /** Agent authentications by result ("ok", "unauthenticated", "permission_denied", "not_found", "unavailable"). */
  agentAuth: Counter<"result">;
  /** Re-checks of connected agents' tokens by result; any but "ok" and "unavailable" closed the token's tunnels. */
  agentTokenRecheck: Counter<"result">;
  /** Streams agents opened whose handler failed after accepting them, by stream kind ("GRPC", "HTTP", …). */
  agentStreamFailures: Counter<"kind">;
}

export function createKasMetrics(registry: Registry = createRegistry("kas")): KasMetrics {
  return {
    registry,
    tunnels: new TunnelMetrics(registry, "kas"),
    requests: new RequestMetrics(registry, "kas"),
    agentAuth: new Counter({
      name: "kas_agent_authentications_total",
      help: "Agent authentications by result.",
      labelNames: ["result"],
      registers: [registry],
    }),
    agentTokenRecheck: new Counter({
      name: "kas_agent_token_rechecks_total",
      help: "Re-checks of connected agents' tokens by result (a refusal closes the token's tunnels).",
      labelNames: ["result"],
      registers: [registry],
    }),
    agentStreamFailures: new Counter({
      name: "kas_agent_stream_handler_errors_total",
      help: "Streams opened by agents whose handler failed after accepting them, by stream kind.",
      labelNames: ["kind"],
      registers: [registry],
    }),
  };
}
