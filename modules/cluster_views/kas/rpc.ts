// `ClusterViewsService.PushViews` on the agents' gRPC server: each message of the calling agent
// (the tunnel's identity) is checked and handed to the hub one at a time, in order; while one is
// applied the stream is paused, so a slow Redis slows the agent's sender instead of queueing here.
// While the stream is up the agent's views stay alive; when it ends the agent is disconnected.
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import {
  type ClusterViewsServiceServer,
  ClusterViewsServiceService,
  type PushViewsRequest,
} from "../../../proto/gen/cluster_views/v1/cluster_views.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import { type AgentRpc, callingAgent, flat } from "../../runtime/index.ts";
import { parseClusterViews } from "../limits.ts";
import type { Hub } from "./hub.ts";
import type { ClusterViewsMetrics } from "./metrics.ts";
import type { PresenceRefresher } from "./presence.ts";
import type { ViewsUpdate } from "./store.ts";

/** A message bigger than this is refused (views are small by construction). */
export const MAX_VIEWS_JSON = 256 * 1024;

export interface PushViewsOptions {
  rpc: AgentRpc;
  hub: Hub;
  metrics: ClusterViewsMetrics;
  log: Logger;
  /** Keeps the views of the agents whose streams are open alive. */
  presence: PresenceRefresher;
  /** Streams open now, ended at close. */
  streams: Set<grpc.ServerReadableStream<PushViewsRequest, unknown>>;
}

/** A message as an update, or why it is refused. */
export function toUpdate(m: PushViewsRequest): ViewsUpdate | { error: string } {
  const seq = Number(m.seq);
  if (!Number.isSafeInteger(seq) || seq <= 0) return { error: `seq ${m.seq} is not a positive safe integer` };
  if (m.viewsJson.length > MAX_VIEWS_JSON)
    return { error: `views_json is ${m.viewsJson.length} bytes, more than ${MAX_VIEWS_JSON}` };
  const parsed = parseClusterViews(m.viewsJson);
  if ("error" in parsed) return { error: `views_json: ${parsed.error}` };
  return { seq, snapshot: m.snapshot, views: parsed.views };
}

export function addClusterViewsService(o: PushViewsOptions): void {
  const service: ClusterViewsServiceServer = {
    pushViews(call, callback) {
      const agentId = callingAgent(o.rpc, call, callback)?.identity.agentId;
      if (agentId === undefined) return;
      // Headers at once: agentk sends its snapshot when it sees them (the stream is up end to end).
      call.sendMetadata(new grpc.Metadata());
      // Kept as long as the stream (and in the store): flat, not randomUUID's rope.
      const owner = flat(randomUUID());
      // A child logger only when there is something to log (most streams never do).
      const log = () => o.log.child({ agentId });
      o.streams.add(call);
      o.metrics.streams.set(o.streams.size);
      let finished = false;
      let applying: Promise<void> = Promise.resolve();
      o.presence.add(agentId, owner);
      const finish = (err: grpc.ServiceError | null) => {
        if (finished) return;
        finished = true;
        o.presence.remove(owner);
        o.streams.delete(call);
        o.metrics.streams.set(o.streams.size);
        call.removeAllListeners("data");
        void applying
          .then(() => o.hub.disconnected(agentId, owner))
          .catch((e: unknown) => log().warn({ err: e }, "cannot record the agent's disconnection"));
        if (err) callback(err);
        else callback(null, {});
      };
      call.on("data", (m: PushViewsRequest) => {
        const update = toUpdate(m);
        if ("error" in update) {
          o.metrics.updates.inc({ result: "invalid" });
          log().warn({ err: update.error, epoch: m.epoch }, "refused a views update");
          finish({ code: grpc.status.INVALID_ARGUMENT, details: update.error } as grpc.ServiceError);
          return;
        }
        call.pause();
        applying = applying
          .then(() => o.hub.update(agentId, owner, update))
          .then(
            () => undefined,
            (err: unknown) => {
              log().warn({ err }, "cannot store a views update");
              finish({
                code: grpc.status.UNAVAILABLE,
                details: `cannot store the views: ${(err as Error).message}`,
              } as grpc.ServiceError);
            },
          )
          .finally(() => {
            if (!finished) call.resume();
          });
      });
      call.on("end", () => void applying.then(() => finish(null)));
      call.on("error", () => finish(null));
      call.on("cancelled", () => finish(null));
    },
  };
  o.rpc.server.addService(ClusterViewsServiceService, service);
}
