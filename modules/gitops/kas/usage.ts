// Git push notifications as GitLab's kas 16.5 counts them for GitLab (its flux module:
// `flux_git_push_notifications_total`, `flux_git_push_notified_unique_projects`): each agent told to
// reconcile a pushed project it follows counts once, with the project's id. Here the agents told are
// those whose manifest project streams on this replica follow the project: the push polls it at once.
import type { PushedProject, UsageRegistry } from "../../runtime/index.ts";
import type { RefWatches } from "./watches.ts";

/** `watches.pushed`, counting the agents it notified. */
export function pushUsageCounters(
  usage: UsageRegistry,
  watches: Pick<RefWatches, "pushed" | "agentsFollowing">,
): { pushed(project: PushedProject): number } {
  const notified = usage.counter("flux_git_push_notifications_total");
  const projects = usage.uniqueCounter("flux_git_push_notified_unique_projects");
  return {
    pushed(project) {
      const { agents, projectId } = watches.agentsFollowing(project);
      if (agents.size > 0) {
        notified.inc(agents.size);
        if (projectId !== undefined) projects.add(projectId);
      }
      return watches.pushed(project);
    },
  };
}
