// The configuration as protojson of agentcfg's ConfigurationFile: what GitLab's kas posts to
// GitLab (agent_configuration). The names are already the proto's json_name (snake_case); only
// durations differ: milliseconds here, protojson's google.protobuf.Duration text ("3600s") there.
import type { AgentConfiguration } from "./configuration.ts";
import { formatProtoDuration } from "./proto-duration.ts";

/** The configuration with durations as protojson writes them; a fresh object (the input is not touched). */
export function configurationFileProtoJson(config: AgentConfiguration): Record<string, unknown> {
  const out = structuredClone(config) as Json;
  for (const project of ((out.gitops as Json | undefined)?.manifest_projects ?? []) as Json[]) {
    durationField(project, "reconcile_timeout");
    durationField(project, "prune_timeout");
  }
  durationField(out.container_scanning as Json | undefined, "scanner_timeout");
  durationField(out.remote_development as Json | undefined, "partial_sync_interval");
  durationField(out.remote_development as Json | undefined, "full_sync_interval");
  return out;
}

type Json = Record<string, unknown>;

function durationField(o: Json | undefined, key: string): void {
  if (o && typeof o[key] === "number") o[key] = formatProtoDuration(o[key]);
}
