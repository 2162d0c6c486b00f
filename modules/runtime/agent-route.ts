// The shape of the read-only routes on GitLab's API front that show one agent's state:
// `GET /api/v1/agents/{agent_id}/<name>` (HEAD too), read from a store, answered as JSON.
import type { ServerResponse } from "node:http";
import { HttpError, requestTarget } from "../../tool/http/serve/index.ts";
import type { ApiRoute } from "./kas.ts";

export interface AgentStateRoute<T> {
  /** What the agent's state is called, for the 503 when it cannot be read ("GitOps state"). */
  what: string;
  read(agentId: string): Promise<T>;
  /** Answers with what was read (or throws an HttpError: 404 when there is nothing). */
  answer(res: ServerResponse, agentId: string, state: T): void;
}

/** `GET /api/v1/agents/{agent_id}/<name>`; other methods 405, a store that cannot answer 503. */
export function agentStateRoute<T>(name: string, o: AgentStateRoute<T>): ApiRoute {
  const path = new RegExp(`^/api/v1/agents/([1-9]\\d{0,18})/${name}/?$`);
  return {
    route: `/api/v1/agents/{agent_id}/${name}`,
    matches: (pathname) => path.test(pathname),
    async handle(req, res) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        throw new HttpError(405, "only GET is allowed here", { allow: "GET, HEAD" });
      }
      const agentId = path.exec(requestTarget(req).pathname)![1]!;
      let state: T;
      try {
        state = await o.read(agentId);
      } catch (err) {
        throw new HttpError(503, `cannot read ${o.what}: ${(err as Error).message}`);
      }
      o.answer(res, agentId, state);
    },
  };
}
