// Git push notifications on GitLab's gRPC API: GitLab's Notifications.GitPushEvent, the same effect
// as `POST /api/v1/notifications/git_push`.
import * as grpc from "@grpc/grpc-js";
import {
  type NotificationsServer,
  NotificationsService,
  protobufFileName,
} from "../../../proto/gen/agent_configuration/v1/notifications_rpc.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import {
  announceGitPush,
  type Broadcast,
  type GitLabRpc,
  type PushedProject,
  positiveId,
  rpcError,
} from "../../runtime/index.ts";

const MAX_FULL_PATH = 1024;

/** `gitlab.agent.notifications.rpc.Notifications` on GitLab's gRPC API. */
export function addNotificationsService(rpc: GitLabRpc, broadcast: Broadcast, log: Logger): void {
  const service: NotificationsServer = {
    gitPushEvent(call, callback) {
      const project = call.request.event?.project;
      const id = project && project.id !== "0" ? positiveId(project.id) : undefined;
      const fullPath = project?.fullPath ?? "";
      if (!project || (id === undefined && fullPath === "")) {
        callback(rpcError(grpc.status.INVALID_ARGUMENT, "event.project needs an id or a full_path"));
        return;
      }
      if (project.id !== "0" && id === undefined) {
        callback(rpcError(grpc.status.INVALID_ARGUMENT, "event.project.id must be a positive id"));
        return;
      }
      if (fullPath.length > MAX_FULL_PATH) {
        callback(
          rpcError(
            grpc.status.INVALID_ARGUMENT,
            `event.project.full_path: at most ${MAX_FULL_PATH} characters`,
          ),
        );
        return;
      }
      const pushed: PushedProject = { ...(id && { id }), ...(fullPath && { fullPath }) };
      announceGitPush(broadcast, log, pushed).then(() => callback(null, {}), callback);
    },
  };
  rpc.addService(NotificationsService, service, protobufFileName);
}
