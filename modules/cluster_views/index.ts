// What other kas modules may use of the cluster views (the dashboard does): the views' shapes and
// the hub that reads them and their events, from any replica; and `serveEvents`, which streams the
// hub's events to an HTTP client as Server-Sent Events (resumable with Last-Event-ID, heartbeats,
// a slow reader cut). The hub itself comes from `clusterViewsModule`'s `onHub`, handed on by the
// daemon's composition (cmd/kas/server.ts). Everything else in this folder is the module's own.
//
// `views.ts`, re-exported here, is also public on its own: it imports nothing, so a browser bundle
// (the dashboard's page) may import the shapes from it without pulling in kas's server code.
export { type SseOptions, serveEvents } from "./kas/sse.ts";
export type {
  AgentViews,
  ClusterViews,
  NamespacePods,
  NodeCondition,
  NodeProblem,
  NodesView,
  PodPhase,
  PodProblem,
  PodsView,
  Resources,
  Rollout,
  RolloutState,
  ViewEvent,
  ViewName,
  ViewsHub,
  Warning,
  WarningsView,
  WorkloadsView,
} from "./views.ts";
export { VIEW_NAMES } from "./views.ts";
