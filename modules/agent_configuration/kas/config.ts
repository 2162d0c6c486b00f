// The agent configuration module's section of kas's configuration: agent.configuration.
import { z } from "zod";
import { countSetting, durationAtLeast } from "../../../tool/config/kinds.ts";

export const agentConfigurationKasSection = z.object({
  pollPeriodMs: durationAtLeast("1s", "each poll is a call to Gitaly for every configuration project", {
    default: "300s",
    doc: "How often kas looks for a new commit in each agent's configuration project (one ref lookup per project; the agents' files are read only when the commit moved, together: one listing and one batch per project). A push notification triggers a look at once.",
  }),
  maxConfigurationFileSize: countSetting({
    default: 131072,
    doc: "Largest .gitlab/agents/<name>/config.yaml accepted, in bytes; a larger one is refused and the agent keeps its configuration.",
  }),
});

export type AgentConfigurationKasConfig = z.output<typeof agentConfigurationKasSection>;
