// Sections a config.yaml may hold, that GitLab's agent acts on, and this one does not (yet).
// They are parsed, validated and kept (kas passes them on, and posts them to GitLab), but the
// agent does nothing with them: kas says so on its API, in its log and in a metric, never silently.
import type { AgentConfiguration } from "./configuration.ts";

const SECTIONS = {
  container_scanning: (c: AgentConfiguration) => c.container_scanning,
  remote_development: (c: AgentConfiguration) => c.remote_development,
  "observability.google_profiler": (c: AgentConfiguration) => c.observability.google_profiler,
};

export type UnsupportedSection = keyof typeof SECTIONS;
export const UNSUPPORTED_SECTIONS = Object.keys(SECTIONS) as UnsupportedSection[];

/** The unsupported sections `config` sets, in a stable order; empty when none. */
export function unsupportedSections(config: AgentConfiguration): UnsupportedSection[] {
  return UNSUPPORTED_SECTIONS.filter((section) => SECTIONS[section](config) !== undefined);
}
