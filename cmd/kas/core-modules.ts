// kas's own modules: what every capability leans on and is not a capability itself. The agent
// listener (8150) and GitLab's API front (8153) run under the same runner as the capabilities.
import { type Authenticate, Kind } from "../../lib/tunnel/index.ts";
import type { AgentIdentity, KasModuleFactory } from "../../modules/runtime/index.ts";
import { Phase } from "../../modules/runtime/index.ts";
import type { HttpListener } from "../../tool/http/serve/index.ts";
import type { AgentRpcServer } from "./agent-rpc.ts";
import { type AgentListener, type AgentListenerOptions, serveAgents } from "./agents/index.ts";
import { type ApiRouteTable, type GitLabRpcServer, serveApi } from "./api/index.ts";
import type { TokenRecheck } from "./auth/index.ts";
import type { KasConfig, KasSecrets } from "./config/index.ts";
import type { KasMetrics } from "./observability/index.ts";

export interface AgentListenerModuleOptions {
  config: KasConfig;
  metrics: KasMetrics;
  authenticate: Authenticate<AgentIdentity>;
  tokenRecheck: TokenRecheck | undefined;
  tunnel: NonNullable<AgentListenerOptions["tunnel"]>;
  /** Each tunnel as it comes up (the per-token limits hold its slot). */
  onTunnel?: AgentListenerOptions["onTunnel"];
  /** Told the listener once it serves (tests, the daemon's `agents`). */
  onListening?: (listener: AgentListener) => void;
}

/**
 * Where agentk connects. Up before the capabilities (their stream kinds and routes are registered
 * by then); when kas stops, every tunnel gets GoAway at once, so agents start moving to other
 * replicas while the fronts drain, and their streams get the grace period.
 */
export function agentListenerModule(o: AgentListenerModuleOptions): KasModuleFactory {
  return {
    name: "agent_listener",
    phase: Phase.core,
    create({ log, router, agentStreams }) {
      let listener: AgentListener | undefined;
      const { listen } = o.config.agent;
      return {
        name: "agent_listener",
        get urls() {
          return listener ? { agent: listener.url } : {};
        },
        async start() {
          listener = await serveAgents({
            listen,
            router,
            authenticate: o.authenticate,
            handshakeTimeoutMs: listen.handshakeTimeoutMs,
            maxLoopUtilization: listen.handshakeLoopUtilization,
            maxConnections: listen.maxConnections,
            maxStreamsPerConnection: o.config.connectionLimits.maxStreamsPerConnection,
            limitCounter: o.metrics.requests,
            maxConnectionAgeMs: listen.maxConnectionAgeMs,
            ageDrainGraceMs: o.config.shutdownGracePeriodMs,
            dispatcher: agentStreams,
            ...(o.tokenRecheck && { tokenRecheck: o.tokenRecheck }),
            ...(o.onTunnel && { onTunnel: o.onTunnel }),
            tunnel: o.tunnel,
            log,
          });
          const { acceptor } = listener.server.listener;
          o.metrics.agentHandshakes.watch(() => acceptor.handshakeStats);
          o.onListening?.(listener);
        },
        drain() {
          // No new tunnels here (a load balancer retries the connect elsewhere), GoAway to the others.
          listener?.server.listener.server.close();
          for (const session of listener?.server.sessions ?? []) session.goAway();
        },
        close: async (graceMs) => listener?.close(graceMs),
      };
    },
  };
}

/**
 * GitLab's API (8153), serving the routes and gRPC services modules added (HTTP/1.1 JSON and gRPC
 * on one port); off without its shared secret. Draining, its health service says NOT_SERVING.
 */
export function apiFrontModule(
  config: KasConfig,
  secrets: KasSecrets,
  routes: ApiRouteTable,
  rpc: GitLabRpcServer | undefined,
): KasModuleFactory {
  return {
    name: "api",
    phase: Phase.front,
    create({ log, requests }) {
      let listener: HttpListener | undefined;
      return {
        name: "api",
        get urls() {
          return listener ? { api: listener.url } : {};
        },
        async start() {
          if (secrets.apiSecret === undefined || rpc === undefined) {
            log.warn({}, "API for GitLab disabled: api.listen.authentication_secret_file is not set");
            return;
          }
          rpc.start();
          listener = await serveApi({
            listen: config.api.listen,
            limits: config.connectionLimits,
            secret: secrets.apiSecret,
            routes,
            metrics: requests,
            log,
            grpc: rpc.connections,
          });
        },
        drain() {
          rpc?.drain();
          // Every HTTP answer from now on says `Connection: close`: GitLab's kept-alive
          // connections end after their next exchange, before close() stops accepting.
          listener?.drain();
        },
        close: async (graceMs) => listener?.close(graceMs),
      };
    },
  };
}

/**
 * The gRPC server agents call: the `grpc` streams agents open are served by one grpc-js server,
 * each call tagged with the tunnel it came over. Modules add their services to `agentRpc.server`.
 */
export function agentRpcModule(rpc: AgentRpcServer): KasModuleFactory {
  return {
    name: "agent_rpc",
    phase: Phase.core,
    create({ agentStreams }) {
      agentStreams.register(Kind.KIND_GRPC, rpc.handler);
      return { name: "agent_rpc", close: (graceMs) => rpc.close(graceMs) };
    },
  };
}
