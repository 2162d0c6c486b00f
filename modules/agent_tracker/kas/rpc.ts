import * as grpc from "@grpc/grpc-js";
import {
  type AgentTrackerServiceServer,
  AgentTrackerServiceService,
} from "../../../proto/gen/agent_tracker/v1/agent_tracker.ts";
import { type AgentRpc, callingAgent } from "../../runtime/index.ts";
import { AGENT_POD_LIMITS } from "./connected-agents.ts";
import type { AgentTracker } from "./tracker.ts";

/** `AgentTrackerService` on the agents' gRPC server: the caller is the tunnel's agent, whatever it says. */
export function addAgentTrackerService(rpc: AgentRpc, tracker: Pick<AgentTracker, "report">): void {
  const service: AgentTrackerServiceServer = {
    reportAgent(call, callback) {
      const session = callingAgent(rpc, call, callback);
      if (!session) return;
      const meta = call.request.agentMeta;
      const k = meta?.kubernetesVersion;
      // Untrusted: every string the agent sends is bounded, as it is kept and republished.
      const fields = [
        meta?.version,
        meta?.podNamespace,
        meta?.podName,
        meta?.commitId,
        k?.major,
        k?.minor,
        k?.gitVersion,
        k?.platform,
      ];
      if (fields.some((f) => (f ?? "").length > AGENT_POD_LIMITS.field)) {
        callback({
          code: grpc.status.INVALID_ARGUMENT,
          details: `agent_meta fields are limited to ${AGENT_POD_LIMITS.field} characters`,
        });
        return;
      }
      tracker.report(session, {
        namespace: meta?.podNamespace ?? "",
        name: meta?.podName ?? "",
        version: meta?.version ?? "",
        // Empty: agentk does not know (or is older than these fields); kept absent, as GitLab's empty.
        ...(meta?.commitId && { commitId: meta.commitId }),
        ...(k && {
          kubernetesVersion: {
            major: k.major,
            minor: k.minor,
            gitVersion: k.gitVersion,
            platform: k.platform,
          },
        }),
      });
      callback(null, {});
    },
  };
  rpc.server.addService(AgentTrackerServiceService, service);
}
