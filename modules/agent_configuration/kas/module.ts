// Agent configuration's kas half: reads each connected agent's .gitlab/agents/<name>/config.yaml
// from its project (Gitaly, or local git), validates it, and streams it to the agent; shows it on
// GitLab's API; polls at once on a git push notification from any replica; posts each new
// configuration to GitLab (with gitlab.address), once per agent and commit across replicas.
import { postAgentConfiguration } from "../../../tool/gitlab/index.ts";
import { type KasModuleFactory, Phase, pollOnGitPush } from "../../runtime/index.ts";
import type { AgentConfigurationKasConfig } from "./config.ts";
import { addConfigurationProjectService } from "./config-files-rpc.ts";
import { createConfigurationMetrics } from "./metrics.ts";
import { addNotificationsService } from "./notifications-rpc.ts";
import { ConfigurationPoster, LOCAL_CLAIMS, RedisPostClaims } from "./post-configuration.ts";
import { configurationRoute, gitPushRoute } from "./routes.ts";
import { addAgentConfigurationService } from "./rpc.ts";
import { LocalStatusStore, RedisStatusStore, type StatusStore } from "./status-store.ts";
import { ConfigurationWatches } from "./watches.ts";

export function agentConfigurationModule(
  config: AgentConfigurationKasConfig,
  /** Told of the status store once built (the dashboard reads it). */
  onStatusStore?: (store: StatusStore) => void,
): KasModuleFactory {
  return {
    name: "agent_configuration",
    phase: Phase.capability,
    create({
      log,
      registry,
      readiness,
      repositories,
      broadcast,
      redis,
      agentRpc,
      api,
      gitlabRpc,
      configurations,
      gitlab,
    }) {
      const metrics = createConfigurationMetrics(registry);
      let store: StatusStore | undefined;
      // Static tokens without GitLab: nobody to tell.
      const poster =
        gitlab &&
        new ConfigurationPoster({
          post: (agentId, agentConfig, signal) =>
            postAgentConfiguration(gitlab, agentId, agentConfig, signal),
          // An hour: far longer than the replicas polling for one agent take to read its new commit.
          claims: redis ? new RedisPostClaims(redis, 3600) : LOCAL_CLAIMS,
          posts: metrics.posts,
          log,
        });
      const watches = new ConfigurationWatches({
        repositories,
        pollPeriodMs: config.pollPeriodMs,
        maxFileBytes: config.maxConfigurationFileSize,
        metrics,
        log,
        onState: (state) => {
          store?.put(state);
          poster?.offer(state);
        },
      });
      const local = new LocalStatusStore((agentId) => watches.stateOf(agentId));
      // Outlives a few polls, so a replica that stops polling for an agent is soon forgotten.
      store = redis ? new RedisStatusStore(redis, 3 * config.pollPeriodMs + 60_000, local, log) : local;
      const known = store;
      onStatusStore?.(store);
      // Nothing read yet (commitId undefined) is not "no configuration": say unknown.
      configurations.provide(async (agentId) => {
        const state = await known.get(agentId);
        return state?.commitId === undefined ? undefined : state.configuration;
      });
      addAgentConfigurationService(agentRpc, watches, metrics);
      api.add(configurationRoute(store));
      api.add(gitPushRoute(broadcast, log));
      addNotificationsService(gitlabRpc, broadcast, log);
      addConfigurationProjectService(gitlabRpc, repositories);
      let stopListening = () => {};
      let stopHealth = () => {};
      return {
        name: "agent_configuration",
        start() {
          stopListening = pollOnGitPush(broadcast, log, watches, metrics.pushes);
          // A repository kas cannot read is a detail, not unreadiness: every replica shares
          // Gitaly, so taking this one out of the load balancer would not help.
          stopHealth = readiness.add("agent_configuration", () => {
            const failing = watches.failing();
            if (failing.size === 0) return;
            const [first] = failing.values();
            return `${failing.size} configuration project(s) cannot be read; agents keep their configuration: ${first}`;
          });
        },
        drain() {
          stopListening();
        },
        async close() {
          stopHealth();
          poster?.close();
          watches.close();
        },
      };
    },
  };
}
