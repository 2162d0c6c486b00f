// `GitopsService` on the agents' gRPC server. GetObjectsToSynchronize: the calling agent's (the
// tunnel's identity) manifest project, checked by ProjectAccess, sent commit by commit (header,
// the files in chunks of at most 1 MiB, trailer) whenever the ref moves away from what the agent
// has; a refusal or a limit ends the stream with its status and is recorded for GitLab's API.
// ReportSync: the agent's account of a sync, checked, bounded, recorded and counted.
import * as grpc from "@grpc/grpc-js";
import {
  type GetObjectsToSynchronizeResponse,
  type GitopsServiceServer,
  GitopsServiceService,
  type ReportSyncRequest,
} from "../../../proto/gen/gitops/v1/gitops.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import {
  type AgentIdentity,
  type AgentRpc,
  callingAgent,
  type ProjectAccess,
  ProjectAccessError,
  type ProjectRepository,
  type RefSelector,
  RepositoryError,
  type RepositoryReader,
} from "../../runtime/index.ts";
import type { GitopsKasConfig } from "./config.ts";
import { globProblem } from "./globs.ts";
import { describeRef, type ManifestFile, Refusal, readManifests, refProblem } from "./manifests.ts";
import type { GitopsMetrics } from "./metrics.ts";
import type { GitopsStatusStore, ObjectResultRecord, SyncReport } from "./status-store.ts";
import type { RefEvent, RefWatches } from "./watches.ts";

/** Largest `data` of one Object message. */
export const MAX_CHUNK_BYTES = 1024 * 1024;
/** Bounds of a sync report. */
export const MAX_REPORTED_OBJECTS = 10_000;
const MAX_NAME = 253;
const MAX_ERROR = 4096;
const MAX_SOURCE = 1024;
const MAX_PROJECT = 1024;
const OBJECT_STATUSES = new Set(["applied", "unchanged", "pruned", "failed", "skipped"]);

export interface GitopsServiceDeps {
  rpc: AgentRpc;
  projects: ProjectAccess;
  repositories: RepositoryReader;
  watches: Pick<RefWatches, "subscribe">;
  store: GitopsStatusStore;
  metrics: GitopsMetrics;
  config: GitopsKasConfig;
  log: Logger;
}

const ACCESS_STATUS = {
  forbidden: grpc.status.PERMISSION_DENIED,
  not_found: grpc.status.NOT_FOUND,
  unavailable: grpc.status.UNAVAILABLE,
} as const;

function statusError(code: grpc.status, details: string): Partial<grpc.ServiceError> {
  return Object.assign(new Error(details), { code, details });
}

/** The request's ref as a RefSelector (none: the default branch). */
function refOf(ref: { branch?: string; tag?: string; commit?: string } | undefined): RefSelector {
  if (ref?.branch !== undefined) return { branch: ref.branch };
  if (ref?.tag !== undefined) return { tag: ref.tag };
  if (ref?.commit !== undefined) return { commit: ref.commit };
  return {};
}

/** The names a push notification may give the project: its numeric id, its full path(s). */
function projectNames(requested: string, repo: ProjectRepository): string[] {
  const names = [requested];
  if (repo.projectId !== "") names.push(repo.projectId);
  if (repo.location.backend === "gitaly") names.push(repo.location.repository.glProjectPath);
  return names;
}

export function addGitopsService(deps: GitopsServiceDeps): void {
  const { rpc, projects, repositories, watches, store, metrics, config, log } = deps;

  const service: GitopsServiceServer = {
    getObjectsToSynchronize(call) {
      const session = callingAgent(rpc, call, (err) => call.emit("error", err));
      if (!session) return;
      const agent: AgentIdentity = session.identity;
      const req = call.request;
      const project = req.projectId;
      const ref = refOf(req.ref);
      const globs = req.paths.map((p) => p.glob);
      const abort = new AbortController();
      let open = true;
      let unsubscribe = () => {};
      metrics.streams.inc();

      const done = () => {
        if (!open) return;
        open = false;
        metrics.streams.dec();
        abort.abort(new Error("the stream ended"));
        unsubscribe();
        session.off("close", end);
      };
      const end = () => {
        if (!open) return;
        done();
        call.end();
      };
      /** Ends the stream with a status, recorded for GitLab's API. */
      const refuse = (refusal: Refusal, commitId?: string) => {
        if (!open) return;
        done();
        metrics.refusals.inc({ code: refusal.codeName });
        log.info(
          { agentId: agent.agentId, project, code: refusal.codeName, reason: refusal.message },
          "GitOps manifests refused",
        );
        if (project !== "" && project.length <= MAX_PROJECT) {
          void store.put(agent.agentId, project, "problem", {
            kind: "refused",
            code: refusal.codeName,
            message: refusal.message,
            ...(commitId && { commitId }),
            at: new Date().toISOString(),
          });
        }
        call.emit("error", statusError(refusal.code, refusal.message));
      };
      call.on("cancelled", done);
      call.on("close", done);
      call.on("finish", done);
      session.once("close", end);

      /** Resolves when the message is taken, or once the client reads again after it was not. */
      const send = async (message: GetObjectsToSynchronizeResponse): Promise<void> => {
        if (!open) throw abort.signal.reason;
        if (call.write(message)) return;
        await new Promise<void>((resolve) => {
          const go = () => {
            call.off("drain", go);
            abort.signal.removeEventListener("abort", go);
            resolve();
          };
          call.on("drain", go);
          abort.signal.addEventListener("abort", go, { once: true });
        });
        if (!open) throw abort.signal.reason;
      };

      const sendCommit = async (repo: ProjectRepository, commit: string, files: ManifestFile[]) => {
        const numericId =
          repo.projectId !== "" ? repo.projectId : /^[1-9]\d{0,18}$/.test(project) ? project : "0";
        await send({ header: { commitId: commit, projectId: numericId, agentId: agent.agentId } });
        for (const file of files) {
          // An empty file is one empty object; a big one spans consecutive objects with its source.
          for (let at = 0; at === 0 || at < file.data.length; at += MAX_CHUNK_BYTES) {
            await send({ object: { source: file.path, data: file.data.subarray(at, at + MAX_CHUNK_BYTES) } });
          }
        }
        await send({ trailer: {} });
        metrics.commitsSent.inc();
        const bytes = files.reduce((n, f) => n + f.data.length, 0);
        await store.put(agent.agentId, project, "sent", {
          commitId: commit,
          projectId: repo.projectId,
          files: files.length,
          bytes,
          at: new Date().toISOString(),
        });
        await store.clear(agent.agentId, project, "problem");
      };

      const run = async () => {
        const problem = requestProblem(project, globs, ref, config.maxNumberOfPaths);
        if (problem) return refuse(problem);
        let repo: ProjectRepository;
        try {
          repo = await projects.repositoryFor(agent, project, abort.signal);
        } catch (err) {
          if (!open) return;
          if (err instanceof ProjectAccessError)
            return refuse(new Refusal(ACCESS_STATUS[err.code], err.message));
          throw err;
        }
        if (!open) return;

        let has = req.commitId.slice(0, 64);
        let latest: string | undefined;
        let pumping = false;
        const ctx = { agentId: agent.agentId, signal: abort.signal };
        const pump = async () => {
          if (pumping) return;
          pumping = true;
          try {
            while (open && latest !== undefined && latest !== has) {
              const commit = latest;
              let files: ManifestFile[];
              try {
                files = await readManifests(repositories, repo.location, commit, globs, config, ctx);
              } catch (err) {
                if (!open) return;
                if (err instanceof Refusal) return refuse(err, commit);
                // The commit could not be read: the agent asks again (backing off) and gets it then.
                const message = `cannot read the manifests of ${describeRef(ref)} at commit ${commit}: ${(err as Error).message}`;
                return refuse(new Refusal(grpc.status.UNAVAILABLE, message), commit);
              }
              await sendCommit(repo, commit, files);
              has = commit;
            }
          } catch (err) {
            if (open) log.error({ err, agentId: agent.agentId, project }, "GitOps stream failed");
            if (open) refuse(new Refusal(grpc.status.INTERNAL, "kas failed to send the manifests"));
          } finally {
            pumping = false;
          }
        };
        const onEvent = (event: RefEvent) => {
          if (!open) return;
          if (!event.ok) {
            const err = event.error;
            if (err instanceof RepositoryError && err.code === "not_found") {
              return refuse(
                new Refusal(
                  grpc.status.NOT_FOUND,
                  `project ${JSON.stringify(project)}: its repository does not exist`,
                ),
              );
            }
            // The watch polls again soon, backing off; the agent keeps what it has meanwhile.
            void store.put(agent.agentId, project, "problem", {
              kind: "repository",
              message: `cannot poll ${describeRef(ref)}: ${(err as Error)?.message ?? String(err)}`,
              at: new Date().toISOString(),
            });
            return;
          }
          if (event.commit === undefined) {
            return refuse(
              new Refusal(
                grpc.status.FAILED_PRECONDITION,
                `project ${JSON.stringify(project)}: ${describeRef(ref)} does not exist`,
              ),
            );
          }
          latest = event.commit;
          void pump();
        };
        unsubscribe = watches.subscribe(
          { location: repo.location, ref, agentId: agent.agentId, projectNames: projectNames(project, repo) },
          onEvent,
        );
        if (!open) unsubscribe();
      };
      run().catch((err: unknown) => {
        log.error({ err, agentId: agent.agentId, project }, "GitOps stream failed");
        refuse(new Refusal(grpc.status.INTERNAL, "kas failed to serve the manifests"));
      });
    },

    reportSync(call, callback) {
      const agent = callingAgent(rpc, call, callback)?.identity;
      if (!agent) return;
      const fail = (code: grpc.status, details: string) => callback(statusError(code, details));
      const parsed = parseReport(call.request);
      if (typeof parsed === "string") return fail(grpc.status.INVALID_ARGUMENT, parsed);
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
    },
  };
  rpc.server.addService(GitopsServiceService, service);
}

/** What is wrong with the request before kas reads anything, as a refusal. */
function requestProblem(
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
function parseReport(r: ReportSyncRequest): SyncReport | string {
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
