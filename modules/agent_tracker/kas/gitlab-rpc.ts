// Agent tracking on GitLab's gRPC API: GitLab's AgentTracker service (its wire names), answering
// from the same record as `GET /api/v1/agents`.
import * as grpc from "@grpc/grpc-js";
import { RegistryUnavailableError } from "../../../lib/router/index.ts";
import {
  type AgentTrackerServer,
  AgentTrackerService,
  type ConnectedAgentInfo,
  protobufFileName,
} from "../../../proto/gen/agent_tracker/v1/gitlab_rpc.ts";
import { type GitLabRpc, positiveId, rpcError } from "../../runtime/index.ts";
import type { AgentFilter, AgentPod, ConnectedAgent } from "./connected-agents.ts";

/** Ids in one call: GitLab asks for a page of agents or projects, never thousands. */
export const MAX_IDS = 1000;

/**
 * One entry per connection (tunnel), as GitLab lists them: its own id, when it connected, and the
 * agentk replica behind it (empty until it reported itself). A summary from a kas replica older
 * than connection ids has no connections: one entry per reported pod then, with connection id 0.
 */
export function connectedAgentInfos(agent: ConnectedAgent): ConnectedAgentInfo[] {
  const ids = { agentId: agent.agentId, projectId: agent.projectId };
  const meta = (pod: AgentPod | undefined) => ({
    version: pod?.version ?? "",
    commitId: pod?.commitId ?? "",
    podNamespace: pod?.namespace ?? "",
    podName: pod?.name ?? "",
    kubernetesVersion: pod?.kubernetesVersion,
  });
  if (agent.connections !== undefined) {
    return agent.connections.map((c) => ({
      ...ids,
      connectionId: c.connectionId,
      connectedAt: new Date(c.connectedAt),
      agentMeta: meta(c.pod),
    }));
  }
  const pods: (AgentPod | undefined)[] = agent.pods ?? [undefined];
  return pods.map((pod) => ({
    ...ids,
    connectionId: "0",
    connectedAt: new Date(agent.connectedSince),
    agentMeta: meta(pod),
  }));
}

/** The ids asked for, checked: INVALID_ARGUMENT naming the field otherwise. */
function checkedIds(ids: readonly string[], field: string): Set<string> {
  if (ids.length === 0) throw rpcError(grpc.status.INVALID_ARGUMENT, `${field}: at least one id is needed`);
  if (ids.length > MAX_IDS) throw rpcError(grpc.status.INVALID_ARGUMENT, `${field}: at most ${MAX_IDS} ids`);
  const bad = ids.find((id) => positiveId(id) === undefined);
  if (bad !== undefined)
    throw rpcError(grpc.status.INVALID_ARGUMENT, `${field}: ${bad} is not a positive id`);
  return new Set(ids);
}

type Tracker = { connectedAgents(filter?: AgentFilter): Promise<ConnectedAgent[]> };

/** Agents of any live replica whose `key` is in `ids`; UNAVAILABLE when Redis cannot say. */
async function connected(tracker: Tracker, key: "agentId" | "projectId", ids: Set<string>) {
  let agents: ConnectedAgent[];
  try {
    // One id: the tracker filters; several: one listing, filtered here.
    agents = await tracker.connectedAgents(ids.size === 1 ? { [key]: [...ids][0]! } : {});
  } catch (err) {
    if (!(err instanceof RegistryUnavailableError)) throw err;
    throw rpcError(grpc.status.UNAVAILABLE, `cannot list the agents of other kas replicas: ${err.message}`);
  }
  return { agents: agents.filter((a) => ids.has(a[key])).flatMap(connectedAgentInfos) };
}

/** GetConnectedAgents' oneof as the same lookup as the By... methods, with one id. */
function singleLookup(request: { projectId?: string; agentId?: string }) {
  if (request.projectId !== undefined)
    return { key: "projectId", field: "project_id", id: request.projectId } as const;
  if (request.agentId !== undefined)
    return { key: "agentId", field: "agent_id", id: request.agentId } as const;
  // GitLab's proto requires the oneof (validate.required).
  throw rpcError(grpc.status.INVALID_ARGUMENT, "request: project_id or agent_id is required");
}

/** `gitlab.agent.agent_tracker.rpc.AgentTracker` on GitLab's gRPC API. */
export function addAgentTrackerGitLabService(rpc: GitLabRpc, tracker: Tracker): void {
  const service: AgentTrackerServer = {
    // GitLab before the By... methods: one project or one agent, the same answer as theirs.
    getConnectedAgents(call, callback) {
      Promise.resolve()
        .then(() => {
          const { key, field, id } = singleLookup(call.request);
          return connected(tracker, key, checkedIds([id], field));
        })
        .then((answer) => callback(null, answer), callback);
    },
    getConnectedAgentsByProjectIDs(call, callback) {
      Promise.resolve()
        .then(() => connected(tracker, "projectId", checkedIds(call.request.projectIds, "project_ids")))
        .then((answer) => callback(null, answer), callback);
    },
    getConnectedAgentsByAgentIDs(call, callback) {
      Promise.resolve()
        .then(() => connected(tracker, "agentId", checkedIds(call.request.agentIds, "agent_ids")))
        .then((answer) => callback(null, answer), callback);
    },
  };
  rpc.addService(AgentTrackerService, service, protobufFileName);
}
