export {
  type AgentFilter,
  type ConnectedAgent,
  mergeSummaries,
  parseSummary,
  summarize,
} from "./connected-agents.ts";
export { type AgentListener, type AgentListenerOptions, type AgentSession, serveAgents } from "./listener.ts";
