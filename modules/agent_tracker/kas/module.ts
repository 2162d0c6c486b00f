// Agent tracking's kas half: which agents are connected, at this replica and across replicas,
// and which agentk pods and versions are behind their tunnels; listed on GitLab's API.
import { type KasModuleFactory, Phase } from "../../runtime/index.ts";
import { agentsRoute } from "./agents-route.ts";
import { addAgentTrackerGitLabService } from "./gitlab-rpc.ts";
import { addAgentTrackerService } from "./rpc.ts";
import { AgentTracker } from "./tracker.ts";

export function agentTrackerModule(onTracker?: (tracker: AgentTracker) => void): KasModuleFactory {
  return {
    name: "agent_tracker",
    phase: Phase.capability,
    create({ router, api, agentRpc, gitlabRpc }) {
      const tracker = new AgentTracker(router);
      api.add(agentsRoute(tracker));
      addAgentTrackerGitLabService(gitlabRpc, tracker);
      addAgentTrackerService(agentRpc, tracker);
      onTracker?.(tracker);
      return { name: "agent_tracker" };
    },
  };
}
