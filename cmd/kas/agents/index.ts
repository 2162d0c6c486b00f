export {
  type AgentListener,
  type AgentListenerOptions,
  type AgentSession,
  type ConnectedAgent,
  serveAgents,
} from "./listener.ts";
