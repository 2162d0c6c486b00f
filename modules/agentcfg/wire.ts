// kas -> agentk: the validated configuration as JSON. agentk re-validates it with the lenient
// agent-side schema (unknown keys dropped), so a newer kas cannot make an older agent refuse it.
import { type AgentConfiguration, agentSideSchema } from "./configuration.ts";
import { AgentConfigurationError } from "./errors.ts";
import { fromZodIssues } from "./issues.ts";

/** JSON for the wire. Durations are numbers of milliseconds; defaults are already applied. */
export function serializeAgentConfiguration(config: AgentConfiguration): string {
  return JSON.stringify(config);
}

/** The agent side: JSON from kas -> a validated configuration. Throws AgentConfigurationError. */
export function deserializeAgentConfiguration(json: string): AgentConfiguration {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (e) {
    throw new AgentConfigurationError([{ path: "", message: `not JSON: ${(e as Error).message}` }], "wire");
  }
  const result = agentSideSchema.safeParse(value);
  if (!result.success) throw new AgentConfigurationError(fromZodIssues(result.error.issues), "wire");
  return result.data;
}
