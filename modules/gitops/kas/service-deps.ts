// What the GitOps service's handlers share: their dependencies, and how a refusal becomes a status.
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../../../tool/observability/index.ts";
import type { AgentRpc, ProjectAccess, RepositoryReader, UsageCounter } from "../../runtime/index.ts";
import type { GitopsKasConfig } from "./config.ts";
import type { GitopsMetrics } from "./metrics.ts";
import type { GitopsStatusStore } from "./status-store.ts";
import type { RefWatches } from "./watches.ts";

export interface GitopsServiceDeps {
  rpc: AgentRpc;
  projects: ProjectAccess;
  repositories: RepositoryReader;
  watches: Pick<RefWatches, "subscribe">;
  store: GitopsStatusStore;
  metrics: GitopsMetrics;
  /** GitLab's `gitops_sync` usage count: commits sent to agents. */
  syncs?: UsageCounter;
  config: GitopsKasConfig;
  log: Logger;
}

export const ACCESS_STATUS = {
  forbidden: grpc.status.PERMISSION_DENIED,
  not_found: grpc.status.NOT_FOUND,
  unavailable: grpc.status.UNAVAILABLE,
} as const;

export function statusError(code: grpc.status, details: string): Partial<grpc.ServiceError> {
  return Object.assign(new Error(details), { code, details });
}
