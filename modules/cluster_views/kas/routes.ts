// GitLab's API front (its JWT checked before any route runs):
// - `GET /api/v1/agents/{agent_id}/views`: the agent's views now (404 when kas has none);
// - `GET /api/v1/agents/{agent_id}/events`: its views events as Server-Sent Events;
// - `GET /api/v1/events`: every agent's, for a dashboard.
import { HttpError, requestTarget, sendJson } from "../../../tool/http/serve/index.ts";
import { type ApiRoute, agentStateRoute } from "../../runtime/index.ts";
import type { ViewsHub } from "../views.ts";
import { type SseOptions, serveEvents } from "./sse.ts";

const AGENT_EVENTS_PATH = /^\/api\/v1\/agents\/([1-9]\d{0,18})\/events\/?$/;
const ALL_EVENTS_PATH = /^\/api\/v1\/events\/?$/;

export function viewsRoute(hub: ViewsHub): ApiRoute {
  return agentStateRoute("views", {
    what: "the views",
    read: (agentId) => hub.current(agentId),
    answer(res, agentId, views) {
      if (!views) throw new HttpError(404, `kas has no views of agent ${agentId}`);
      sendJson(res, 200, views);
    },
  });
}

export interface EventsRouteOptions extends SseOptions {
  /** Subscribers this replica serves at most; beyond, 503. */
  maxSubscribers: number;
  /** How many are served now. */
  subscribers: () => number;
}

function eventsRoute(route: string, path: RegExp, o: EventsRouteOptions): ApiRoute {
  return {
    route,
    matches: (pathname) => path.test(pathname),
    async handle(req, res) {
      if (req.method !== "GET") throw new HttpError(405, "only GET is allowed here", { allow: "GET" });
      const agentId = path.exec(requestTarget(req).pathname)![1];
      if (o.subscribers() >= o.maxSubscribers) {
        throw new HttpError(
          503,
          `this kas replica serves its maximum of ${o.maxSubscribers} views event subscribers`,
          { "retry-after": "5" },
        );
      }
      await serveEvents(req, res, agentId === undefined ? {} : { agentId }, o);
    },
  };
}

export const agentEventsRoute = (o: EventsRouteOptions): ApiRoute =>
  eventsRoute("/api/v1/agents/{agent_id}/events", AGENT_EVENTS_PATH, o);

export const allEventsRoute = (o: EventsRouteOptions): ApiRoute =>
  eventsRoute("/api/v1/events", ALL_EVENTS_PATH, o);
