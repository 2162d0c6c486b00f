import {
  type AgentConfigurationServiceServer,
  AgentConfigurationServiceService,
} from "../../../proto/gen/agent_configuration/v1/agent_configuration.ts";
import { serializeAgentConfiguration } from "../../agentcfg/index.ts";
import { type AgentRpc, callingAgent, untilStreamEnds } from "../../runtime/index.ts";
import type { ConfigurationMetrics } from "./metrics.ts";
import type { ConfigurationWatches } from "./watches.ts";

/**
 * `AgentConfigurationService` on the agents' gRPC server: the calling agent's configuration (the
 * tunnel's agent, whatever the request says), now unless the agent has that commit, then on each
 * change. A refused file sends nothing: the agent keeps what it has.
 */
export function addAgentConfigurationService(
  rpc: AgentRpc,
  watches: Pick<ConfigurationWatches, "subscribe">,
  metrics: Pick<ConfigurationMetrics, "streams">,
): void {
  const service: AgentConfigurationServiceServer = {
    getConfiguration(call) {
      const session = callingAgent(rpc, call, (err) => call.emit("error", err));
      if (!session) return;
      let sent = call.request.commitId.slice(0, 64); // a commit id; anything longer is not one
      metrics.streams.inc();
      const unsubscribe = watches.subscribe(session.identity, sent, (state) => {
        if (state.commitId === undefined || state.commitId === sent || call.cancelled) return;
        sent = state.commitId;
        call.write({ configurationJson: serializeAgentConfiguration(state.configuration), commitId: sent });
      });
      untilStreamEnds(call, session, () => {
        metrics.streams.dec();
        unsubscribe();
      });
    },
  };
  rpc.server.addService(AgentConfigurationServiceService, service);
}
