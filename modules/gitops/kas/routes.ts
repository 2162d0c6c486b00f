// `GET /api/v1/agents/{agent_id}/gitops` on GitLab's API front: per manifest project of the agent,
// the last commit kas sent, the last sync the agent reported, and the last error (a refusal or a
// repository problem of kas's, or the error the agent reported), from whichever replica wrote it.
import { HttpError, sendJson } from "../../../tool/http/serve/index.ts";
import type { ApiRoute } from "../../runtime/index.ts";
import type { GitopsStatusStore, ProjectStatus } from "./status-store.ts";

const GITOPS_PATH = /^\/api\/v1\/agents\/([1-9]\d{0,18})\/gitops\/?$/;

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
  return {
    route: "/api/v1/agents/{agent_id}/gitops",
    matches: (pathname) => GITOPS_PATH.test(pathname),
    async handle(req, res) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        throw new HttpError(405, "only GET is allowed here", { allow: "GET, HEAD" });
      }
      const agentId = GITOPS_PATH.exec(new URL(req.url ?? "/", "http://kas").pathname)![1]!;
      let projects: Map<string, ProjectStatus>;
      try {
        projects = await store.get(agentId);
      } catch (err) {
        throw new HttpError(503, `cannot read GitOps state: ${(err as Error).message}`);
      }
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
  };
}
