export { type AgentListener, type AgentListenerOptions, type AgentSession, serveAgents } from "./listener.ts";
export { closeOnRevocation } from "./revocation.ts";
