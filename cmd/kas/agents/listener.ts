import { readFile } from "node:fs/promises";
import type { Router } from "../../../lib/router/index.ts";
import {
  type Authenticate,
  type RejectedHandshake,
  type StreamDispatcher,
  serveTunnels,
  type TunnelOptions,
  type TunnelServer,
  type TunnelSession,
} from "../../../lib/tunnel/index.ts";
import type { AgentIdentity } from "../auth/index.ts";
import type { ListenConfig } from "../config/index.ts";
import type { TunnelMetrics } from "../observability/index.ts";

export type AgentSession = TunnelSession<AgentIdentity>;

/** An agent with tunnels at this replica, as the API lists it. */
export interface ConnectedAgent {
  agentId: string;
  projectId: string;
  agentName: string;
  /** Tunnels up here (agent replicas x connections each). */
  tunnels: number;
  /** When the oldest of them connected. */
  connectedSince: string;
}

export interface AgentListenerOptions {
  listen: ListenConfig;
  authenticate: Authenticate<AgentIdentity>;
  router: Router;
  metrics?: TunnelMetrics;
  handshakeTimeoutMs?: number;
  /** Tunnels older than this get GoAway (the agent reconnects, maybe to another replica). */
  maxConnectionAgeMs?: number;
  /** Grace given to a tunnel drained for age. Default 30 s. */
  ageDrainGraceMs?: number;
  tunnel?: TunnelOptions;
  /**
   * Serves the streams agents open toward kas (configuration feed, GitOps, informer views…):
   * later modules register their kinds here. Without it such streams are refused.
   */
  dispatcher?: StreamDispatcher<AgentSession>;
  onReject?: (rejected: RejectedHandshake) => void;
  log?: { info(obj: object, msg: string): void };
}

export interface AgentListener {
  readonly url: string;
  readonly server: TunnelServer<AgentIdentity>;
  /** Agents with a tunnel here, optionally only those of one project. */
  connectedAgents(filter?: { projectId?: string; agentId?: string }): ConnectedAgent[];
  /** Stop accepting, GoAway to every tunnel, give their streams `graceMs` to finish, close. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Where agentk connects: `serveTunnels` with the agent authentication hook; each tunnel is
 * registered with the router under the authenticated agent id and counted in the metrics.
 */
export async function serveAgents(options: AgentListenerOptions): Promise<AgentListener> {
  const { listen, router, metrics, dispatcher, log } = options;
  const tls =
    listen.certificateFile && listen.keyFile
      ? { cert: await readFile(listen.certificateFile), key: await readFile(listen.keyFile) }
      : undefined;
  const server = await serveTunnels<AgentIdentity>({
    ...(listen.address.host !== undefined && { host: listen.address.host }),
    port: listen.address.port,
    ...(tls && { tls }),
    authenticate: options.authenticate,
    ...(options.handshakeTimeoutMs !== undefined && { handshakeTimeoutMs: options.handshakeTimeoutMs }),
    ...(options.tunnel && { tunnel: options.tunnel }),
    ...(options.onReject && { onReject: options.onReject }),
    onSession: (session) => {
      const { agentId, projectId } = session.identity;
      metrics?.track(session, agentId);
      router.register(agentId, session);
      if (dispatcher) session.on("stream", (stream) => void dispatcher.handle(stream, session));
      if (options.maxConnectionAgeMs !== undefined) {
        const timer = setTimeout(
          () => void session.drain(options.ageDrainGraceMs ?? 30_000),
          options.maxConnectionAgeMs,
        );
        timer.unref();
        session.on("close", () => clearTimeout(timer));
      }
      const remoteAddress = session.stats.remoteAddress;
      log?.info({ agentId, projectId, remoteAddress }, "agent connected");
      session.on("close", (err) =>
        log?.info({ agentId, projectId, remoteAddress, ...(err && { err }) }, "agent disconnected"),
      );
    },
  });

  return {
    url: server.url,
    server,
    connectedAgents(filter = {}) {
      const byAgent = new Map<string, ConnectedAgent & { since: number }>();
      for (const s of server.sessions) {
        if (s.closed) continue;
        const { agentId, projectId, agentName } = s.identity;
        if (filter.projectId !== undefined && projectId !== filter.projectId) continue;
        if (filter.agentId !== undefined && agentId !== filter.agentId) continue;
        const since = s.stats.connectedAt.getTime();
        const entry = byAgent.get(agentId);
        if (entry) {
          entry.tunnels++;
          entry.since = Math.min(entry.since, since);
        } else {
          byAgent.set(agentId, { agentId, projectId, agentName, tunnels: 1, connectedSince: "", since });
        }
      }
      return [...byAgent.values()]
        .map(({ since, ...a }) => ({ ...a, connectedSince: new Date(since).toISOString() }))
        .sort((a, b) => Number(a.agentId) - Number(b.agentId));
    },
    close: (graceMs = 30_000) => server.close(graceMs),
  };
}
