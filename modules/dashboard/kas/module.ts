// The dashboard as a kas module: a front (it starts once the capabilities, the cluster views
// among them, have), off unless dashboard.listen.address is set. It reads the views through the
// cluster views' public surface only (modules/cluster_views/index.ts); the hub itself comes from
// `hubOf`, which the daemon's composition wires to `clusterViewsModule`'s `onHub`.
import { readFile } from "node:fs/promises";
import { Counter, Gauge } from "prom-client";
import { ConfigError } from "../../../tool/config/errors.ts";
import type { ConnectionLimits } from "../../../tool/http/serve/index.ts";
import type { ViewsHub } from "../../cluster_views/index.ts";
import type { KasModuleFactory } from "../../runtime/index.ts";
import { listenerModule, Phase } from "../../runtime/index.ts";
import { AgentStatuses, type StatusSources } from "./agent-status.ts";
import { loadDashboardAssets } from "./assets.ts";
import type { DashboardKasConfig } from "./config.ts";
import { MemoryHistoryStore, RedisHistoryStore } from "./history-store.ts";
import { recordHistory } from "./recorder.ts";
import { RedisRevocations } from "./redis-revocations.ts";
import { MemoryRevocations } from "./revocations.ts";
import { serveDashboard } from "./server.ts";

export function dashboardModule(
  config: DashboardKasConfig,
  hubOf: () => ViewsHub | undefined,
  tuning?: { heartbeatMs?: number },
  /** kas's connection_limits, for the dashboard's listener. */
  limits?: ConnectionLimits,
  /** What other modules know of each agent (tracker, configuration, GitOps), asked once the dashboard starts. */
  sourcesOf: () => StatusSources = () => ({}),
): KasModuleFactory {
  return listenerModule("dashboard", Phase.front, "dashboard", async (deps) => {
    const { log, registry, requests } = deps;
    const { address } = config.listen;
    if (address === undefined) return undefined;
    const hub = hubOf();
    if (!hub) throw new Error("dashboard.listen.address is set, but kas has no cluster views to show");
    const token = config.tokenFile === undefined ? undefined : await readToken(config.tokenFile);
    const streams = new Gauge({
      name: "kas_dashboard_event_streams",
      help: "Open event streams of dashboard pages.",
      registers: [registry],
    });
    const drops = new Counter({
      name: "kas_dashboard_event_streams_dropped_total",
      help: "Dashboard event streams cut (too slow a reader, or the views hub dropped them), by reason.",
      labelNames: ["reason"],
      registers: [registry],
    });
    const assets = await loadDashboardAssets();
    // With Redis, a logout on one replica holds on all of them.
    const revocations = deps.redis
      ? new RedisRevocations(deps.redis, deps.broadcast, log)
      : new MemoryRevocations();
    // With Redis, every replica shows the same history.
    const history = deps.redis ? new RedisHistoryStore(deps.redis) : new MemoryHistoryStore();
    const recorder = recordHistory(hub, history, log);
    const stopRevocations = () => {
      recorder.close();
      if (revocations instanceof RedisRevocations) revocations.close();
    };
    const server = await serveDashboard({
      listen: { ...config.listen, address },
      ...(token !== undefined && { token }),
      sessionTtlMs: config.sessionTtlMs,
      sessionGeneration: config.sessionGeneration,
      revocations,
      hub,
      statuses: new AgentStatuses(sourcesOf()),
      history,
      assets,
      ...(tuning?.heartbeatMs !== undefined && { heartbeatMs: tuning.heartbeatMs }),
      log,
      metrics: requests,
      ...(limits && { limits }),
      onStreams: (n) => streams.set(n),
      onDrop: (reason) => drops.inc({ reason: reason === "too slow" ? reason : "hub" }),
    }).catch((err: unknown) => {
      stopRevocations();
      throw err;
    });
    log.info({ url: server.url, login: token !== undefined }, "dashboard listening");
    return {
      url: server.url,
      async close(graceMs: number) {
        await server.close(graceMs);
        stopRevocations();
      },
    };
  });
}

async function readToken(path: string): Promise<string> {
  const field = "dashboard.token_file";
  let token: string;
  try {
    token = (await readFile(path, "utf8")).trim();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError([{ field, message: `cannot read ${path}: ${code}` }]);
  }
  if (token.length < 16) {
    throw new ConfigError([{ field, message: `${path} must hold a token of at least 16 characters` }]);
  }
  return token;
}
