// `GitopsService` on the agents' gRPC server. GetObjectsToSynchronize (manifest-stream.ts): the
// calling agent's (the tunnel's identity) manifest project, checked by ProjectAccess, sent commit by
// commit whenever the ref moves away from what the agent has. ReportSync (report-sync.ts): the
// agent's account of a sync, checked, bounded, recorded and counted. What each checks of its
// request is requests.ts's.
import { type GitopsServiceServer, GitopsServiceService } from "../../../proto/gen/gitops/v1/gitops.ts";
import { serveManifestStream } from "./manifest-stream.ts";
import { reportSync } from "./report-sync.ts";
import type { GitopsServiceDeps } from "./service-deps.ts";

export { MAX_CHUNK_BYTES, MAX_REPORTED_OBJECTS } from "./requests.ts";
export type { GitopsServiceDeps } from "./service-deps.ts";

export function addGitopsService(deps: GitopsServiceDeps): void {
  const service: GitopsServiceServer = {
    getObjectsToSynchronize: (call) => serveManifestStream(call, deps),
    reportSync: (call, callback) => reportSync(call, callback, deps),
  };
  deps.rpc.server.addService(GitopsServiceService, service);
}
