import { Counter, Gauge, type Registry } from "prom-client";

export interface GitopsMetrics {
  polls: Counter<"result">;
  repositoryErrors: Counter<"code">;
  watches: Gauge;
  streams: Gauge;
  commitsSent: Counter;
  refusals: Counter<"code">;
  syncs: Counter<"result">;
  objects: Counter<"status">;
  pushes: Counter<"result">;
}

export function createGitopsMetrics(registry: Registry): GitopsMetrics {
  return {
    polls: new Counter({
      name: "kas_gitops_polls_total",
      help: "Polls of manifest projects' refs, by result (unchanged, changed, error).",
      labelNames: ["result"],
      registers: [registry],
    }),
    repositoryErrors: new Counter({
      name: "kas_gitops_repository_errors_total",
      help: "Polls of manifest projects that could not reach the repository, by error code.",
      labelNames: ["code"],
      registers: [registry],
    }),
    watches: new Gauge({
      name: "kas_gitops_watches",
      help: "Manifest project refs this replica polls (one poll serves every agent following it).",
      registers: [registry],
    }),
    streams: new Gauge({
      name: "kas_gitops_streams",
      help: "Open GetObjectsToSynchronize streams.",
      registers: [registry],
    }),
    commitsSent: new Counter({
      name: "kas_gitops_commits_sent_total",
      help: "Commits of manifest projects sent to agents (header, objects, trailer).",
      registers: [registry],
    }),
    refusals: new Counter({
      name: "kas_gitops_refusals_total",
      help: "GetObjectsToSynchronize streams ended by a refusal or a limit, by gRPC status.",
      labelNames: ["code"],
      registers: [registry],
    }),
    syncs: new Counter({
      name: "kas_gitops_syncs_total",
      help: "Syncs agents reported, by result (succeeded, failed, dry_run).",
      labelNames: ["result"],
      registers: [registry],
    }),
    objects: new Counter({
      name: "kas_gitops_objects_total",
      help: "Objects in the syncs agents reported, by status (applied, unchanged, pruned, failed, skipped).",
      labelNames: ["status"],
      registers: [registry],
    }),
    pushes: new Counter({
      name: "kas_gitops_push_notifications_total",
      help: "Git push notifications heard, by result (polled: watches polled here; unknown: none here).",
      labelNames: ["result"],
      registers: [registry],
    }),
  };
}
