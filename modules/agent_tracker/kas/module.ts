// Agent tracking's kas half: which agents are connected, at this replica and across replicas,
// listed on GitLab's API.
import { type KasModuleFactory, Phase } from "../../runtime/index.ts";
import { agentsRoute } from "./agents-route.ts";
import { AgentTracker } from "./tracker.ts";

export function agentTrackerModule(onTracker?: (tracker: AgentTracker) => void): KasModuleFactory {
  return {
    name: "agent_tracker",
    phase: Phase.capability,
    create({ router, agentTunnels, api }) {
      const tracker = new AgentTracker(router, agentTunnels);
      api.add(agentsRoute(tracker));
      onTracker?.(tracker);
      return { name: "agent_tracker" };
    },
  };
}
