// The agent configuration file (.gitlab/agents/<name>/config.yaml): schema, parser, wire form.
import { type AgentConfiguration, agentConfigurationSchema } from "./configuration.ts";

export { CLUSTER_VIEW_NAMES, MAX_CLUSTER_VIEWS_NAMESPACES } from "./cluster-views.ts";
export { type AgentConfiguration, agentConfigurationSchema, agentSideSchema } from "./configuration.ts";
export { parseDuration } from "./duration.ts";
export { AgentConfigurationError, type AgentConfigurationIssue } from "./errors.ts";
export {
  DEFAULT_MANIFEST_GLOB,
  DEFAULT_MANIFEST_NAMESPACE,
  DEFAULT_PRUNE_TIMEOUT_MS,
  DEFAULT_RECONCILE_TIMEOUT_MS,
  DRY_RUN_STRATEGIES,
  INVENTORY_POLICIES,
  PRUNE_PROPAGATION_POLICIES,
} from "./gitops.ts";
export { GO_YAML_OPTIONS, goYamlNumber } from "./go-yaml.ts";
export { DEFAULT_GRPC_LOG_LEVEL, DEFAULT_LOG_LEVEL, LOG_LEVELS, type LogLevel } from "./observability.ts";
export {
  DEFAULT_MAX_CONFIG_BYTES,
  MAX_ALIAS_COUNT,
  type ParseOptions,
  parseAgentConfiguration,
} from "./parse.ts";
export { formatProtoDuration, MAX_DURATION_MS, parseProtoDuration } from "./proto-duration.ts";
export { configurationFileProtoJson } from "./proto-json.ts";
export { UNSUPPORTED_SECTIONS, type UnsupportedSection, unsupportedSections } from "./unsupported.ts";
export { deserializeAgentConfiguration, serializeAgentConfiguration } from "./wire.ts";

/** What an empty config.yaml means: every feature off, logging at its defaults. */
export const EMPTY_AGENT_CONFIGURATION: Readonly<AgentConfiguration> = Object.freeze(
  agentConfigurationSchema.parse({}),
);
