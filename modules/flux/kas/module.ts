// Flux's kas half: streams the projects pushed to (GitLab's git push notifications, from any
// replica) to each agent that follows them (GitLab's `GitLabFlux.ReconcileProjects`), and tells
// agents which GitLab their Flux GitRepository objects may point at (`FluxService.GetGitLab`).
import { type FluxServiceServer, FluxServiceService } from "../../../proto/gen/flux/v1/flux.ts";
import { GitLabFluxService } from "../../../proto/gen/flux/v1/gitlab_flux_rpc.ts";
import { callingAgent, type KasModuleFactory, onGitPush, Phase } from "../../runtime/index.ts";
import { createFluxKasMetrics } from "./metrics.ts";
import { PushFanout } from "./pushes.ts";
import { reconcileProjectsHandler } from "./reconcile-projects.ts";

export interface FluxKasOptions {
  /** kas's gitlab.external_url: GitRepository URLs on its host are GitLab projects. */
  gitlabExternalUrl?: string;
}

export function fluxModule({ gitlabExternalUrl }: FluxKasOptions = {}): KasModuleFactory {
  return {
    name: "flux",
    phase: Phase.capability,
    create({ log, registry, agentRpc, projects, broadcast, usage }) {
      const metrics = createFluxKasMetrics(registry);
      const pushes = new PushFanout();
      agentRpc.server.addService(GitLabFluxService, {
        reconcileProjects: reconcileProjectsHandler({
          rpc: agentRpc,
          projects,
          pushes,
          metrics,
          usage: {
            notified: usage.counter("flux_git_push_notifications_total"),
            projects: usage.uniqueCounter("flux_git_push_notified_unique_projects"),
          },
          log,
        }),
      });
      const flux: FluxServiceServer = {
        getGitLab(call, callback) {
          const session = callingAgent(agentRpc, call, (err) => callback(err));
          if (!session) return;
          callback(null, { externalUrl: gitlabExternalUrl ?? "", agentId: session.identity.agentId });
        },
      };
      agentRpc.server.addService(FluxServiceService, flux);
      let stop = () => {};
      return {
        name: "flux",
        start() {
          stop = onGitPush(broadcast, log, (project) => pushes.pushed(project));
        },
        drain() {
          stop();
        },
      };
    },
  };
}
