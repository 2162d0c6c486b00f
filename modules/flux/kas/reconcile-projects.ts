// GitLab's `GitLabFlux.ReconcileProjects` on the agents' gRPC server: the calling agent names the
// projects its Flux GitRepository objects point at; kas streams back each of them that is pushed
// to from then on, once the agent may read it (GitLab's answer, cached). As GitLab's kas: a
// bounded queue per stream (a push that finds it full is dropped and counted), access checked one
// push at a time, the stream open until the tunnel goes.
import * as grpc from "@grpc/grpc-js";
import type {
  GitLabFluxServer,
  ReconcileProjectsRequest,
  ReconcileProjectsResponse,
} from "../../../proto/gen/flux/v1/gitlab_flux_rpc.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import {
  type AgentIdentity,
  type AgentRpc,
  callingAgent,
  type ProjectAccess,
  ProjectAccessError,
  rpcError,
  type UniqueUsageCounter,
  type UsageCounter,
  untilStreamEnds,
} from "../../runtime/index.ts";
import type { FluxKasMetrics } from "./metrics.ts";
import type { FollowedPush, PushFanout } from "./pushes.ts";

/** Pushes waiting per stream (GitLab's maxBufferedNotifications). */
export const MAX_QUEUED_PUSHES = 10;
/** Projects one request may name. */
export const MAX_PROJECTS = 10_000;
export const MAX_PROJECT_PATH = 1024;

export interface ReconcileProjectsDeps {
  rpc: Pick<AgentRpc, "agentOf">;
  projects: ProjectAccess;
  pushes: PushFanout;
  metrics: FluxKasMetrics;
  /**
   * GitLab's usage counts, as its flux module keeps them: each push sent to an agent
   * (`flux_git_push_notifications_total`) and the projects pushed (`flux_git_push_notified_unique_projects`).
   */
  usage: { notified: UsageCounter; projects: UniqueUsageCounter };
  log: Logger;
}

/** The request's project paths, or why it is refused. */
export function requestedProjects(request: ReconcileProjectsRequest): Set<string> | string {
  if (request.project.length > MAX_PROJECTS) return `at most ${MAX_PROJECTS} projects`;
  const paths = new Set<string>();
  for (const [i, p] of request.project.entries()) {
    if (p.id === "") return `project[${i}].id: a full project path is required`;
    if (p.id.length > MAX_PROJECT_PATH) return `project[${i}].id: at most ${MAX_PROJECT_PATH} characters`;
    paths.add(p.id);
  }
  return paths;
}

export function reconcileProjectsHandler(deps: ReconcileProjectsDeps): GitLabFluxServer["reconcileProjects"] {
  return (call) => {
    const session = callingAgent(deps.rpc, call, (err) => call.emit("error", err));
    if (!session) return;
    const paths = requestedProjects(call.request);
    if (typeof paths === "string") {
      call.emit("error", rpcError(grpc.status.INVALID_ARGUMENT, paths));
      return;
    }
    const stream = new ProjectStream(session.identity, deps, (r) => call.write(r));
    const unfollow = deps.pushes.follow(paths, (p) => stream.pushed(p));
    deps.metrics.streams.inc();
    deps.metrics.followed.inc(paths.size);
    deps.log.debug({ agentId: session.identity.agentId, projects: paths.size }, "flux: reconcile projects");
    untilStreamEnds(call, session, () => {
      deps.metrics.streams.dec();
      deps.metrics.followed.dec(paths.size);
      unfollow();
      stream.stop();
    });
  };
}

/** One stream's queue of pushed projects, checked and sent one at a time. */
export class ProjectStream {
  readonly #queue: FollowedPush[] = [];
  readonly #stop = new AbortController();
  #working = false;

  constructor(
    readonly agent: AgentIdentity,
    readonly deps: Omit<ReconcileProjectsDeps, "rpc" | "pushes">,
    readonly send: (response: ReconcileProjectsResponse) => void,
  ) {}

  pushed(project: FollowedPush): void {
    if (this.#stop.signal.aborted) return;
    if (this.#queue.length >= MAX_QUEUED_PUSHES) {
      this.deps.metrics.dropped.inc();
      this.deps.log.debug(
        { agentId: this.agent.agentId, project: project.fullPath },
        "flux: dropping a git push",
      );
      return;
    }
    this.#queue.push(project);
    if (!this.#working) void this.#work();
  }

  stop(): void {
    this.#stop.abort();
    this.#queue.length = 0;
  }

  async #work(): Promise<void> {
    this.#working = true;
    try {
      for (let p = this.#queue.shift(); p !== undefined; p = this.#queue.shift()) await this.#notify(p);
    } finally {
      this.#working = false;
    }
  }

  async #notify(project: FollowedPush): Promise<void> {
    const { fullPath } = project;
    const signal = this.#stop.signal;
    try {
      await this.deps.projects.repositoryFor(this.agent, fullPath, signal);
    } catch (err) {
      if (signal.aborted) return;
      const reason = err instanceof ProjectAccessError ? err.code : "unavailable";
      this.deps.metrics.refused.inc({ reason });
      const log = { agentId: this.agent.agentId, project: fullPath, reason, err: (err as Error).message };
      if (reason === "unavailable")
        this.deps.log.warn(log, "flux: cannot tell whether the agent may read a pushed project");
      else this.deps.log.debug(log, "flux: the agent may not read the pushed project");
      return;
    }
    if (signal.aborted) return;
    this.deps.metrics.notified.inc();
    this.deps.usage.notified.inc();
    if (project.id !== undefined) this.deps.usage.projects.add(project.id);
    this.send({ project: { id: fullPath } });
  }
}
