// The cluster views on GitLab's gRPC API: one agent's views as a server stream (a snapshot, then
// every change), from the ViewsHub any replica reads.
import * as grpc from "@grpc/grpc-js";
import {
  type ClusterViewsWatchServiceServer,
  ClusterViewsWatchServiceService,
  protobufFileName,
  type WatchAgentViewsResponse,
} from "../../../proto/gen/cluster_views/v1/watch.ts";
import { type GitLabRpc, positiveId, rpcError } from "../../runtime/index.ts";
import type { ViewEvent, ViewsHub } from "../views.ts";

/** Events kept for a caller that reads slower than they come; past it the watch ends RESOURCE_EXHAUSTED. */
export const MAX_PENDING_EVENTS = 256;

/** "<agent id>:<seq>" of the same agent, as the hub numbers events. */
const EVENT_ID = /^([1-9]\d{0,18}):\d{1,19}$/;

export function toWatchResponse(event: ViewEvent): WatchAgentViewsResponse {
  return { eventId: event.id, eventType: event.type, eventJson: JSON.stringify(event) };
}

/** `cluster_views.v1.ClusterViewsWatchService` on GitLab's gRPC API. */
export function addViewsWatchService(rpc: GitLabRpc, hub: ViewsHub): void {
  const service: ClusterViewsWatchServiceServer = {
    watchAgentViews(call) {
      let ended = false;
      let unsubscribe = () => {};
      const fail = (code: grpc.status, details: string) => {
        if (ended) return;
        ended = true;
        unsubscribe();
        call.emit("error", rpcError(code, details));
      };
      const agentId = positiveId(call.request.agentId);
      if (agentId === undefined) {
        fail(grpc.status.INVALID_ARGUMENT, "agent_id must be a positive id");
        return;
      }
      const { lastEventId } = call.request;
      if (lastEventId !== "" && EVENT_ID.exec(lastEventId)?.[1] !== agentId) {
        fail(grpc.status.INVALID_ARGUMENT, `last_event_id must be "${agentId}:<seq>", an id this watch sent`);
        return;
      }
      // Cancelled, gone, or past its deadline (grpc-js answers DEADLINE_EXCEEDED itself).
      call.on("cancelled", () => {
        ended = true;
        unsubscribe();
      });
      unsubscribe = hub.subscribe(
        { agentId, ...(lastEventId && { lastEventId }) },
        (event) => {
          if (ended) return;
          if (call.writableLength >= MAX_PENDING_EVENTS) {
            fail(
              grpc.status.RESOURCE_EXHAUSTED,
              `the caller reads too slowly: ${MAX_PENDING_EVENTS} events wait`,
            );
            return;
          }
          call.write(toWatchResponse(event));
        },
        (reason) =>
          fail(grpc.status.UNAVAILABLE, `the watch was cut: ${reason}; call again with last_event_id`),
      );
      if (ended) unsubscribe(); // cancelled while subscribing
    },
  };
  rpc.addService(ClusterViewsWatchServiceService, service, protobufFileName);
}
