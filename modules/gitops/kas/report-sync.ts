// ReportSync: the agent's account of a sync, checked, bounded, recorded and counted.
import * as grpc from "@grpc/grpc-js";
import type { ReportSyncRequest, ReportSyncResponse } from "../../../proto/gen/gitops/v1/gitops.ts";
import { type AgentIdentity, callingAgent, ProjectAccessError } from "../../runtime/index.ts";
import { parseReport } from "./requests.ts";
import { ACCESS_STATUS, type GitopsServiceDeps, statusError } from "./service-deps.ts";

export function reportSync(
  call: grpc.ServerUnaryCall<ReportSyncRequest, ReportSyncResponse>,
  callback: grpc.sendUnaryData<ReportSyncResponse>,
  { rpc, projects, store, metrics, log }: GitopsServiceDeps,
): void {
  const session = callingAgent(rpc, call, callback);
  if (!session) return;
  const agent: AgentIdentity = session.identity;
  const fail = (code: grpc.status, details: string) => callback(statusError(code, details));
  const parsed = parseReport(call.request);
  if (typeof parsed === "string") {
    fail(grpc.status.INVALID_ARGUMENT, parsed);
    return;
  }
  const project = call.request.projectId;
  projects.repositoryFor(agent, project).then(
    async () => {
      await store.put(agent.agentId, project, "sync", parsed);
      const failed = parsed.error !== undefined || (parsed.counts.failed ?? 0) > 0;
      metrics.syncs.inc({
        result: parsed.mode === "dry_run" ? "dry_run" : failed ? "failed" : "succeeded",
      });
      for (const [status, n] of Object.entries(parsed.counts)) metrics.objects.inc({ status }, n);
      callback(null, {});
    },
    (err: unknown) => {
      if (err instanceof ProjectAccessError) return fail(ACCESS_STATUS[err.code], err.message);
      log.error({ err, agentId: agent.agentId }, "GitOps ReportSync failed");
      fail(grpc.status.INTERNAL, "kas failed to record the sync");
    },
  );
}
