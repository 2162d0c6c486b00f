// GitOps's kas half: streams each agent's manifest projects (the files its globs match, commit by
// commit, from Gitaly or local git, within kas's limits) to the agent over its gRPC channel; takes
// the agent's sync reports; shows both on GitLab's API. A git push notification from any replica
// polls the pushed project at once.
import { type KasModuleFactory, Phase, pollOnGitPush } from "../../runtime/index.ts";
import type { GitopsKasConfig } from "./config.ts";
import { createGitopsMetrics } from "./metrics.ts";
import { gitopsRoute } from "./routes.ts";
import { addGitopsService } from "./rpc.ts";
import { type GitopsStatusStore, MemoryStatusStore, RedisStatusStore } from "./status-store.ts";
import { RefWatches } from "./watches.ts";

/** How long the API keeps showing an agent's GitOps state after its last write. */
const STATUS_TTL_MS = 24 * 3600_000;

export function gitopsModule(
  config: GitopsKasConfig,
  /** Told of the status store once built (the dashboard reads it). */
  onStatusStore?: (store: GitopsStatusStore) => void,
): KasModuleFactory {
  return {
    name: "gitops",
    phase: Phase.capability,
    create({ log, registry, repositories, projects, broadcast, redis, agentRpc, api, usage }) {
      const metrics = createGitopsMetrics(registry);
      const watches = new RefWatches({ repositories, pollPeriodMs: config.pollPeriodMs, metrics, log });
      const store = redis
        ? new RedisStatusStore(redis, STATUS_TTL_MS, log)
        : new MemoryStatusStore(STATUS_TTL_MS);
      onStatusStore?.(store);
      addGitopsService({
        rpc: agentRpc,
        projects,
        repositories,
        watches,
        store,
        metrics,
        syncs: usage.counter("gitops_sync"),
        config,
        log,
      });
      api.add(gitopsRoute(store));
      let stopListening = () => {};
      return {
        name: "gitops",
        start() {
          stopListening = pollOnGitPush(broadcast, log, watches, metrics.pushes);
        },
        drain() {
          stopListening();
        },
        async close() {
          watches.close();
        },
      };
    },
  };
}
