// Agent tracking's agentk half: after each new tunnel, agentk tells kas its version and pod over
// the agent's gRPC channel; kas lists them with the agent.
import * as grpc from "@grpc/grpc-js";
import type { TunnelSession } from "../../../lib/tunnel/index.ts";
import { AgentTrackerServiceClient } from "../../../proto/gen/agent_tracker/v1/agent_tracker.ts";
import { VERSION } from "../../../tool/version.ts";
import { type AgentkModuleFactory, Phase } from "../../runtime/index.ts";

export interface AgentTrackerAgentConfig {
  pod: { name?: string; namespace?: string };
}

/** A report that gets no answer by then is given up (the next tunnel reports again). */
const REPORT_DEADLINE_MS = 30_000;

export function agentTrackerAgentModule(config: AgentTrackerAgentConfig): AgentkModuleFactory {
  return {
    name: "agent_tracker",
    phase: Phase.capability,
    create({ kas, kasRpc, log }) {
      // The address and credentials are ignored: calls go over `kasRpc`, inside the tunnel.
      const client = new AgentTrackerServiceClient("kas", grpc.credentials.createInsecure(), {
        channelOverride: kasRpc,
      });
      const agentMeta = {
        version: VERSION,
        podNamespace: config.pod.namespace ?? "",
        podName: config.pod.name ?? "",
      };
      const report = (session: TunnelSession) =>
        client.reportAgent(
          { agentMeta },
          // Queued until the channel's stream is up rather than failing at once.
          new grpc.Metadata({ waitForReady: true }),
          { deadline: Date.now() + REPORT_DEADLINE_MS },
          (err) => {
            if (err && !session.closed)
              log.warn({ err: err.message }, "cannot report agent version and pod to kas");
          },
        );
      return {
        name: "agent_tracker",
        start(signal) {
          kas.on("connected", report);
          signal.addEventListener("abort", () => kas.off("connected", report));
        },
        // No client.close(): it would close the channel, which is agentk's and shared by every module.
      };
    },
  };
}
