// Backpressure of GetObjectsToSynchronize, on the handler itself: while the call's write returns
// false, kas writes nothing more until the call emits 'drain' (a slow agent holds at most one
// message in kas's send buffer), and the commit still arrives whole.
import { EventEmitter } from "node:events";
import { Registry } from "prom-client";
import { expect, test } from "vitest";
import { createGitopsMetrics } from "../../../../modules/gitops/kas/metrics.ts";
import { addGitopsService } from "../../../../modules/gitops/kas/rpc.ts";
import { MemoryStatusStore } from "../../../../modules/gitops/kas/status-store.ts";
import { RefWatches } from "../../../../modules/gitops/kas/watches.ts";
import type { AgentRpc, RepositoryReader } from "../../../../modules/runtime/index.ts";
import type {
  GetObjectsToSynchronizeResponse,
  GitopsServiceServer,
} from "../../../../proto/gen/gitops/v1/gitops.ts";
import { AgentToken } from "../../../../tool/agent-token.ts";
import { silentLogger } from "../../../kas/support/fixtures.ts";
import { until } from "../../../support/until.ts";
import { toCommits } from "./helpers.ts";

const COMMIT = "a".repeat(40);
const MiB = 1024 * 1024;

test("a write that returns false: nothing more is written until 'drain'", async () => {
  const content = Buffer.alloc(3 * MiB + 5, "x");
  const repositories: RepositoryReader = {
    resolveRef: async () => COMMIT,
    listFiles: async () => [{ path: "app.yaml", oid: "b".repeat(40) }],
    readFile: async () => content,
    readFiles: async (_l, _c, paths) => new Map(paths.map((p) => [p, content])),
    close: async () => {},
  };
  const session = Object.assign(new EventEmitter(), {
    identity: { agentId: "42", projectId: "7", agentName: "prod", token: new AgentToken("t") },
  });
  let service: GitopsServiceServer | undefined;
  const rpc = {
    server: { addService: (_: unknown, impl: GitopsServiceServer) => (service = impl) },
    agentOf: () => session,
  } as unknown as AgentRpc;
  const log = silentLogger();
  const metrics = createGitopsMetrics(new Registry());
  const watches = new RefWatches({ repositories, pollPeriodMs: 3_600_000, metrics, log });
  addGitopsService({
    rpc,
    projects: { repositoryFor: async () => ({ projectId: "5", location: { backend: "local", path: "/x" } }) },
    repositories,
    watches,
    store: new MemoryStatusStore(60_000),
    metrics,
    config: {
      pollPeriodMs: 3_600_000,
      projectInfoCacheTtlMs: 300_000,
      projectInfoCacheErrorTtlMs: 60_000,
      maxManifestFileSize: 5 * MiB,
      maxTotalManifestFileSize: 20 * MiB,
      maxNumberOfPaths: 100,
      maxNumberOfFiles: 1000,
    },
    log,
  });
  const written: GetObjectsToSynchronizeResponse[] = [];
  const call = Object.assign(new EventEmitter(), {
    request: { projectId: "group/p", commitId: "", paths: [{ glob: "*.yaml" }], ref: undefined },
    metadata: {},
    cancelled: false,
    write(m: GetObjectsToSynchronizeResponse) {
      written.push(m);
      return false; // the client is slow: every message fills its buffer
    },
    end() {},
  });
  try {
    service!.getObjectsToSynchronize(call as never);
    // header, 4 chunks (1+1+1 MiB and 5 bytes), trailer: each after a 'drain'.
    for (let n = 1; n <= 6; n++) {
      await until(
        () => written.length === n && call.listenerCount("drain") === 1,
        5000,
        `message ${n} and a wait`,
      );
      expect(written.length).toBe(n); // nothing more while kas waits
      call.emit("drain");
      if (n === 6) break;
    }
    const [commit] = toCommits(written);
    expect(commit!.commitId).toBe(COMMIT);
    expect(commit!.projectId).toBe("5");
    expect(commit!.chunks.get("app.yaml")).toEqual([MiB, MiB, MiB, 5]);
  } finally {
    call.emit("cancelled");
    watches.close();
  }
});
