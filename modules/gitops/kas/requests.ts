// What the GitOps service checks of its requests before acting on them: a GetObjectsToSynchronize
// request's project, globs and ref; a ReportSync report's fields, bounded.
import * as grpc from "@grpc/grpc-js";
import type { ReportSyncRequest } from "../../../proto/gen/gitops/v1/gitops.ts";
import type { RefSelector } from "../../runtime/index.ts";
import { globProblem } from "./globs.ts";
import { Refusal, refProblem } from "./manifests.ts";
import type { ObjectResultRecord, SyncReport } from "./status-store.ts";

/** Largest `data` of one Object message. */
export const MAX_CHUNK_BYTES = 1024 * 1024;
/** Bounds of a sync report. */
export const MAX_REPORTED_OBJECTS = 10_000;
const MAX_NAME = 253;
const MAX_ERROR = 4096;
const MAX_SOURCE = 1024;
export const MAX_PROJECT = 1024;
const OBJECT_STATUSES = new Set(["applied", "unchanged", "pruned", "failed", "skipped"]);

/** What is wrong with the request before kas reads anything, as a refusal. */
export function requestProblem(
  project: string,
  globs: readonly string[],
  ref: RefSelector,
  maxPaths: number,
): Refusal | undefined {
  const invalid = (m: string) => new Refusal(grpc.status.INVALID_ARGUMENT, m);
  if (project === "") return invalid("project_id is empty");
  if (project.length > MAX_PROJECT) return invalid(`project_id is longer than ${MAX_PROJECT} characters`);
  if (globs.length === 0) return invalid(`project ${JSON.stringify(project)}: no path globs given`);
  if (globs.length > maxPaths) {
    return new Refusal(
      grpc.status.FAILED_PRECONDITION,
      `project ${JSON.stringify(project)}: ${globs.length} path globs, more than max_number_of_paths (${maxPaths})`,
    );
  }
  for (const [i, glob] of globs.entries()) {
    const problem = globProblem(glob);
    if (problem)
      return invalid(
        `project ${JSON.stringify(project)}: paths[${i}] glob ${JSON.stringify(glob.slice(0, 200))} ${problem}`,
      );
  }
  const bad = refProblem(ref);
  if (bad) return invalid(`project ${JSON.stringify(project)}: ref: ${bad}`);
  return undefined;
}

const cap = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The report as stored, or why it is refused. */
export function parseReport(r: ReportSyncRequest): SyncReport | string {
  if (r.projectId === "") return "project_id is empty";
  if (r.projectId.length > MAX_PROJECT) return `project_id is longer than ${MAX_PROJECT} characters`;
  if (!/^(?:|[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/.test(r.commitId))
    return "commit_id is not a full hex commit id";
  const durationMs = Number(r.durationMs);
  if (!Number.isSafeInteger(durationMs) || durationMs < 0) return "duration_ms must be a non-negative number";
  if (r.mode !== "" && r.mode !== "dry_run")
    return `mode ${JSON.stringify(cap(r.mode, 40))} is not "" or "dry_run"`;
  if (r.objects.length > MAX_REPORTED_OBJECTS) {
    return `${r.objects.length} object results, more than the ${MAX_REPORTED_OBJECTS} kas keeps`;
  }
  const counts: Record<string, number> = {};
  const objects: ObjectResultRecord[] = [];
  for (const [i, o] of r.objects.entries()) {
    if (!OBJECT_STATUSES.has(o.status)) {
      return `objects[${i}].status ${JSON.stringify(cap(o.status, 40))} is not one of ${[...OBJECT_STATUSES].join(", ")}`;
    }
    counts[o.status] = (counts[o.status] ?? 0) + 1;
    objects.push({
      group: cap(o.group, MAX_NAME),
      kind: cap(o.kind, MAX_NAME),
      namespace: cap(o.namespace, MAX_NAME),
      name: cap(o.name, MAX_NAME),
      status: o.status,
      ...(o.error !== "" && { error: cap(o.error, MAX_ERROR) }),
      ...(o.source !== "" && { source: cap(o.source, MAX_SOURCE) }),
    });
  }
  return {
    commitId: r.commitId.toLowerCase(),
    durationMs,
    mode: r.mode === "dry_run" ? "dry_run" : "apply",
    ...(r.error !== "" && { error: cap(r.error, MAX_ERROR) }),
    counts,
    objects,
    at: new Date().toISOString(),
  };
}
