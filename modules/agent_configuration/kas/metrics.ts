import { Counter, Gauge, type Registry } from "prom-client";

export interface ConfigurationMetrics {
  polls: Counter<"result">;
  invalid: Counter;
  repositoryErrors: Counter<"code">;
  watches: Gauge;
  streams: Gauge;
  pushes: Counter<"result">;
  posts: Counter<"result">;
  unsupported: Counter<"section">;
}

export function createConfigurationMetrics(registry: Registry): ConfigurationMetrics {
  return {
    polls: new Counter({
      name: "kas_agent_configuration_polls_total",
      help: "Polls of agent configuration projects, by result (unchanged, changed, error).",
      labelNames: ["result"],
      registers: [registry],
    }),
    invalid: new Counter({
      name: "kas_agent_configuration_invalid_total",
      help: "Agent configuration files refused (invalid YAML, unknown or wrong fields, too large); the agent keeps its last good configuration.",
      registers: [registry],
    }),
    repositoryErrors: new Counter({
      name: "kas_agent_configuration_repository_errors_total",
      help: "Polls that could not read a configuration project, by error code (unavailable, not_found, permission_denied, ...).",
      labelNames: ["code"],
      registers: [registry],
    }),
    watches: new Gauge({
      name: "kas_agent_configuration_projects",
      help: "Configuration projects this replica polls (one poll serves every agent in a project).",
      registers: [registry],
    }),
    streams: new Gauge({
      name: "kas_agent_configuration_streams",
      help: "Open GetConfiguration streams (one per agentk replica connected here).",
      registers: [registry],
    }),
    pushes: new Counter({
      name: "kas_git_push_notifications_total",
      help: "Git push notifications received on GitLab's API, by result (polled: projects polled here; unknown: none here).",
      labelNames: ["result"],
      registers: [registry],
    }),
    posts: new Counter({
      name: "kas_agent_configuration_posts_total",
      help: "Agent configurations posted to GitLab (agent_configuration), by result (posted; elsewhere: another replica posts that commit; not_found: GitLab no longer knows the agent; failed: retried at the next poll).",
      labelNames: ["result"],
      registers: [registry],
    }),
    unsupported: new Counter({
      name: "kas_agent_configuration_unsupported_sections_total",
      help: "Agent configurations read with a section this agent does not act on (kept and passed on, but nothing done with it), by section; once per agent and commit.",
      labelNames: ["section"],
      registers: [registry],
    }),
  };
}
