// The Gitaly test server in a process of its own, on real time (the simulation that calls it runs
// on a virtual clock): serves the repositories under argv[2] as storage "default". Over IPC it
// sends {address} once listening and answers "counts" with its per-method call counters.
import { GitalyTestServer } from "../../test/support/gitaly-server.ts";

const METHODS = ["InfoRefsUploadPack", "FindCommit", "TreeEntry", "GetTreeEntries", "GetBlobs"] as const;
const gitaly = await GitalyTestServer.start({ storages: { default: process.argv[2]! } });
process.send!({ address: gitaly.address });
process.on("message", (m) => {
  if (m !== "counts") return;
  // The server keeps every call's metadata (`seen`); a long simulation does not need it.
  gitaly.seen.length = 0;
  process.send!({ counts: Object.fromEntries(METHODS.map((k) => [k, gitaly.calls(k)])) });
});
process.on("disconnect", () => process.exit(0));
