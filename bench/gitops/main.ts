// npm run bench:gitops [-- --json] [-- --sizes 10,100,1000 --runs 5 --namespaces 4 --file-per-object]
// GitOps: git push -> every object applied, through in-process kas + agentk + the Kubernetes test
// server (push.ts), against the same objects applied directly with server-side apply through
// @kubernetes/client-node (the baseline), measured in the same run.
import { cpus, loadavg } from "node:os";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { measureGitops, type RunSample } from "./push.ts";

const { args, log } = benchArgs({
  sizes: "10,100,1000",
  runs: "5",
  namespaces: "4",
  "file-per-object": false,
  poll: "20",
  "reuse-connections": false,
});
const TARGET_S = 10;
const started = performance.now();
const load0 = loadavg()[0]!;
const results = await measureGitops({
  sizes: args.sizes.split(",").map(Number),
  runs: Number(args.runs),
  namespaces: Number(args.namespaces),
  filePerObject: args["file-per-object"],
  pollMs: Number(args.poll),
  reuseConnections: args["reuse-connections"],
  log,
});
const load1 = loadavg()[0]!;

const s = (ms: number) => round(ms / 1000, 2);
const p50 = (xs: number[]) => percentile(xs, 50);
const of = (samples: RunSample[], k: keyof RunSample) => samples.map((x) => x[k]);
const rows = results.map((r) => {
  const total = p50(of(r.gitops, "totalMs"));
  const base = p50(r.baselineMs);
  const target =
    r.objects === 1000 ? (total / 1000 < TARGET_S ? `< ${TARGET_S} s: ok` : `< ${TARGET_S} s: MISSED`) : "";
  return [
    r.objects,
    `${r.files} (${round(r.bytes / 1024, 1)} KiB)`,
    s(total),
    s(Math.max(...of(r.gitops, "totalMs"))),
    s(base),
    `${round(total / base, 1)}x`,
    round((total - base) / r.objects, 2),
    target,
  ];
});
const phases = results.map((r) => {
  const total = p50(of(r.gitops, "totalMs"));
  const sent = p50(of(r.gitops, "kasSentMs"));
  const sync = p50(of(r.gitops, "agentSyncMs"));
  return [
    r.objects,
    round(sent, 0),
    round(sync, 0),
    round(p50(r.gitops.map((x) => x.totalMs - x.kasSentMs - x.agentSyncMs)), 0),
    round(total, 0),
    r.kubeRequestsPerRun,
    round(p50(r.baselineMs), 0),
  ];
});
const json = {
  apply_s: Object.fromEntries(results.map((r) => [String(r.objects), s(p50(of(r.gitops, "totalMs")))])),
};
if (args.json) {
  process.stdout.write(`${JSON.stringify(json)}\n`);
} else {
  const out = [
    "### push -> all objects applied",
    "",
    markdownTable(
      [
        "objects",
        "files",
        "GitOps p50 s",
        "GitOps max s",
        "direct SSA p50 s (baseline)",
        "GitOps / direct",
        "GitOps extra ms per object",
        "target",
      ],
      rows,
    ),
    "",
    `p50 of ${args.runs} runs per size after one warm-up run (the warm-up creates the new objects); every run a new commit that changes every object. ` +
      `GitOps: POST /api/v1/notifications/git_push -> kas's metrics show the ReportSync (polled every ${args.poll} ms), confirmed on GET /api/v1/agents/42/gitops with every object applied. ` +
      `Baseline: the same objects in other namespaces, server-side apply one after the other with @kubernetes/client-node, same test server. ` +
      `${args["file-per-object"] ? "One file per object" : "One file per namespace and kind"}, ${args.namespaces} namespaces; ` +
      `${args["reuse-connections"] ? "EXPERIMENT --reuse-connections: client-node patched to reuse keep-alive connections (agentk and baseline); " : ""}` +
      `node ${process.version}, ${cpus().length} cores, load average ${round(load0, 2)} -> ${round(load1, 2)}; ${round((performance.now() - started) / 1000, 0)} s in all.`,
    "",
    "### where the time goes (p50 ms)",
    "",
    markdownTable(
      [
        "objects",
        "kas: push -> commit read and sent",
        "agentk: sync (ReportSync durationMs)",
        "rest: stream, report, detection (p50 of each run's rest)",
        "total",
        "Kubernetes requests per sync",
        "baseline SSA",
      ],
      phases,
    ),
    "",
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}
