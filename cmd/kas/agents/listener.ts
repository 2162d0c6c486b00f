import { readFile } from "node:fs/promises";
import type { Router } from "../../../lib/router/index.ts";
import {
  type Authenticate,
  jittered,
  type RejectedHandshake,
  type StreamDispatcher,
  serveTunnels,
  type TunnelOptions,
  type TunnelServer,
  type TunnelSession,
} from "../../../lib/tunnel/index.ts";
import type { AgentIdentity, TokenRecheck } from "../auth/index.ts";
import type { ListenConfig } from "../config/index.ts";
import type { TunnelMetrics } from "../observability/index.ts";
import {
  type AgentFilter,
  type ConnectedAgent,
  mergeSummaries,
  parseSummary,
  summarize,
} from "./connected-agents.ts";
import { closeOnRevocation } from "./revocation.ts";

export type AgentSession = TunnelSession<AgentIdentity>;

export interface AgentListenerOptions {
  listen: ListenConfig;
  authenticate: Authenticate<AgentIdentity>;
  router: Router;
  metrics?: TunnelMetrics;
  handshakeTimeoutMs?: number;
  /** Tunnels older than this, +-10 %, get GoAway (the agent reconnects, maybe to another replica). */
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
  /** Re-checks each tunnel's token while it is open; a refused token closes the agent's tunnels. */
  tokenRecheck?: Pick<TokenRecheck, "watch">;
  log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

export interface AgentListener {
  readonly url: string;
  readonly server: TunnelServer<AgentIdentity>;
  /** Agents with a tunnel at this replica, optionally only those of one project or one id. */
  localAgents(filter?: AgentFilter): ConnectedAgent[];
  /**
   * Agents with a tunnel at any live replica (through Redis when clustered, else this replica's).
   * Rejects with RegistryUnavailableError when Redis cannot answer.
   */
  connectedAgents(filter?: AgentFilter): Promise<ConnectedAgent[]>;
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
  /** This replica's open tunnels per agent id. */
  const byAgent = new Map<string, Set<AgentSession>>();
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
      if (options.tokenRecheck) closeOnRevocation(session, options.tokenRecheck, log);
      track(session);
      if (dispatcher) session.on("stream", (stream) => void dispatcher.handle(stream, session));
      if (options.maxConnectionAgeMs !== undefined) {
        // +-10 %: the tunnels of agents that connected together (say, after a kas restart) are
        // drained, and come back, spread out rather than all at the same moment.
        const timer = setTimeout(
          () => void session.drain(options.ageDrainGraceMs ?? 30_000),
          Math.round(jittered(options.maxConnectionAgeMs, 0.1)),
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

  const localAgents = (filter: AgentFilter = {}) => {
    const ids = filter.agentId !== undefined ? [filter.agentId] : byAgent.keys();
    const summaries = [...ids].flatMap((id) => summarize(byAgent.get(id) ?? []) ?? []);
    return mergeSummaries(summaries, filter);
  };

  return {
    url: server.url,
    server,
    localAgents,
    async connectedAgents(filter = {}) {
      if (!router.clustered) return localAgents(filter);
      const { cluster } = router;
      const others = (await cluster.described()).flatMap((d) =>
        d.replicaId === cluster.replicaId ? [] : (parseSummary(d.info) ?? []),
      );
      return mergeSummaries([...localAgents(filter), ...others], filter);
    },
    close: (graceMs = 30_000) => server.close(graceMs),
  };

  /** Keeps the per-agent tunnel sets, and this replica's summary of the agent in Redis. */
  function track(session: AgentSession): void {
    if (session.closed) return; // gone before it was served: no 'close' would remove it
    const { agentId } = session.identity;
    const tunnels = byAgent.get(agentId) ?? new Set<AgentSession>();
    byAgent.set(agentId, tunnels);
    tunnels.add(session);
    publish(agentId);
    session.on("close", () => {
      tunnels.delete(session);
      if (tunnels.size === 0 && byAgent.get(agentId) === tunnels) byAgent.delete(agentId);
      publish(agentId);
    });
  }

  function publish(agentId: string): void {
    if (!router.clustered) return;
    const summary = summarize(byAgent.get(agentId) ?? []);
    router.cluster.describe(agentId, summary && JSON.stringify(summary));
  }
}
