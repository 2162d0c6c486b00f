// `GET /api/v1/agents/{agent_id}/gitops` on GitLab's API front: per manifest project of the agent,
// the last commit kas sent, the last sync the agent reported, and the last error (a refusal or a
// repository problem of kas's, or the error the agent reported), from whichever replica wrote it.
import { sendJson } from "../../../tool/http/serve/index.ts";
import { type ApiRoute, agentStateRoute } from "../../runtime/index.ts";
import type { GitopsStatusStore, ProjectStatus } from "./status-store.ts";

function lastError(status: ProjectStatus) {
  const kas = status.problem && { source: "kas", ...status.problem };
  const agent = status.sync?.error !== undefined && {
    source: "agent",
    kind: "sync",
    message: status.sync.error,
    commitId: status.sync.commitId,
    at: status.sync.at,
  };
  if (kas && agent) return kas.at >= agent.at ? kas : agent;
  return kas || agent || null;
}

export function gitopsRoute(store: GitopsStatusStore): ApiRoute {
  return agentStateRoute("gitops", {
    what: "GitOps state",
    read: (agentId) => store.get(agentId),
    answer(res, agentId, projects) {
      sendJson(res, 200, {
        agent_id: agentId,
        manifest_projects: [...projects]
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([project, status]) => ({
            project,
            last_sent: status.sent ?? null,
            last_sync: status.sync ?? null,
            last_error: lastError(status),
          })),
      });
    },
  });
}
