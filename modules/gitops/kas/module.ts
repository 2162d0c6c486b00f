// GitOps's kas half: streams each agent's manifest projects (the files its globs match, commit by
// commit, from Gitaly or local git, within kas's limits) to the agent over its gRPC channel; takes
// the agent's sync reports; shows both on GitLab's API. A git push notification from any replica
// polls the pushed project at once.
import { z } from "zod";
import { type KasModuleFactory, Phase } from "../../runtime/index.ts";
import type { GitopsKasConfig } from "./config.ts";
import { createGitopsMetrics } from "./metrics.ts";
import { gitopsRoute } from "./routes.ts";
import { addGitopsService } from "./rpc.ts";
import { MemoryStatusStore, RedisStatusStore } from "./status-store.ts";
import { RefWatches } from "./watches.ts";

/** The channel the agent configuration module's push route publishes on (every replica hears it). */
export const GIT_PUSH_CHANNEL = "git_push";

/** A push as it travels between replicas (checked on arrival: a Redis channel is no trusted input). */
const pushedProject = z
  .object({
    id: z
      .string()
      .regex(/^[1-9]\d{0,18}$/)
      .optional(),
    fullPath: z.string().min(1).max(1024).optional(),
  })
  .strict();

/** How long the API keeps showing an agent's GitOps state after its last write. */
const STATUS_TTL_MS = 24 * 3600_000;

export function gitopsModule(config: GitopsKasConfig): KasModuleFactory {
  return {
    name: "gitops",
    phase: Phase.capability,
    create({ log, registry, repositories, projects, broadcast, redis, agentRpc, api }) {
      const metrics = createGitopsMetrics(registry);
      const watches = new RefWatches({ repositories, pollPeriodMs: config.pollPeriodMs, metrics, log });
      const store = redis
        ? new RedisStatusStore(redis, STATUS_TTL_MS, log)
        : new MemoryStatusStore(STATUS_TTL_MS);
      addGitopsService({ rpc: agentRpc, projects, repositories, watches, store, metrics, config, log });
      api.add(gitopsRoute(store));
      let stopListening = () => {};
      return {
        name: "gitops",
        start() {
          stopListening = broadcast.subscribe(GIT_PUSH_CHANNEL, (message) => {
            let project: z.infer<typeof pushedProject>;
            try {
              project = pushedProject.parse(JSON.parse(message));
            } catch {
              log.warn(
                { message: message.slice(0, 200) },
                "git push: a malformed message from another replica",
              );
              return;
            }
            const polled = watches.pushed(project);
            metrics.pushes.inc({ result: polled > 0 ? "polled" : "unknown" });
          });
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
