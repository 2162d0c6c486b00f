import { RegistryUnavailableError } from "../../../lib/router/index.ts";
import { HttpError, requestTarget, sendJson } from "../../../tool/http/serve/index.ts";
import type { ApiRoute } from "../../runtime/index.ts";
import type { AgentFilter, ConnectedAgent } from "./connected-agents.ts";
import type { AgentTracker } from "./tracker.ts";

export const AGENTS_ROUTE = "/api/v1/agents";

/**
 * `GET /api/v1/agents[?project_id=N][&agent_id=N]` on GitLab's API ->
 * `{"agents": [{agentId, projectId, agentName, tunnels, connectedSince, pods?, connections}]}`:
 * agents with a tunnel at any live kas replica, each tunnel as `{connectionId, connectedAt, pod?}`
 * (503 when Redis cannot say).
 */
export function agentsRoute(tracker: Pick<AgentTracker, "connectedAgents">): ApiRoute {
  return {
    route: AGENTS_ROUTE,
    matches: (pathname) => pathname === AGENTS_ROUTE || pathname === `${AGENTS_ROUTE}/`,
    async handle(req, res) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        throw new HttpError(405, "only GET is allowed here", { allow: "GET, HEAD" });
      }
      const { query } = requestTarget(req);
      const filter: AgentFilter = {};
      for (const [param, key] of [
        ["project_id", "projectId"],
        ["agent_id", "agentId"],
      ] as const) {
        const value = query.get(param);
        if (value === null) continue;
        if (!/^[1-9]\d*$/.test(value)) throw new HttpError(400, `${param} must be a positive integer`);
        filter[key] = value;
      }
      let listed: ConnectedAgent[];
      try {
        listed = await tracker.connectedAgents(filter);
      } catch (err) {
        if (!(err instanceof RegistryUnavailableError)) throw err;
        throw new HttpError(503, `cannot list the agents of other kas replicas: ${err.message}`);
      }
      sendJson(res, 200, { agents: listed });
    },
  };
}
