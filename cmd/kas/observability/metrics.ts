// kas's metrics: the shared tunnel and request metrics under "kas_", agent handshakes and
// authentications, token re-checks, failed agent streams and the per-token tunnel limits.
import { Counter, type Registry } from "prom-client";
import { createRegistry, RequestMetrics, TunnelMetrics } from "../../../tool/observability/index.ts";
import { HandshakeMetrics } from "./handshake-metrics.ts";

export interface KasMetrics {
  registry: Registry;
  tunnels: TunnelMetrics;
  requests: RequestMetrics;
  /** The agent listener's handshakes: in progress, paced, refused at the pending limit. */
  agentHandshakes: HandshakeMetrics;
  /** Agent authentications by result ("ok", "unauthenticated", "permission_denied", "not_found", "unavailable"). */
  agentAuth: Counter<"result">;
  /** Re-checks of connected agents' tokens by result; any but "ok" and "unavailable" closed the token's tunnels. */
  agentTokenRecheck: Counter<"result">;
  /** Streams agents opened whose handler failed after accepting them, by stream kind ("GRPC", "HTTP", …). */
  agentStreamFailures: Counter<"kind">;
  /** Handshakes refused at an agent token's limit, by the setting that refused them. */
  agentTunnelRefusals: Counter<"reason">;
  /** Limit checks Redis could not answer, decided by this process's counts instead, by setting. */
  agentTunnelLimitFallbacks: Counter<"limit">;
}

export function createKasMetrics(registry: Registry = createRegistry("kas")): KasMetrics {
  return {
    registry,
    tunnels: new TunnelMetrics(registry, "kas"),
    requests: new RequestMetrics(registry, "kas"),
    agentHandshakes: new HandshakeMetrics(registry),
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
    agentTunnelRefusals: new Counter({
      name: "kas_agent_tunnel_limit_refusals_total",
      help: "Agent handshakes refused (HTTP 429) at a per-token limit, by reason: connections_per_token_per_minute or max_tunnels_per_token.",
      labelNames: ["reason"],
      registers: [registry],
    }),
    agentTunnelLimitFallbacks: new Counter({
      name: "kas_agent_tunnel_limit_redis_fallbacks_total",
      help: "Per-token limit checks Redis could not answer, decided by this replica's own counts, by limit.",
      labelNames: ["limit"],
      registers: [registry],
    }),
  };
}
