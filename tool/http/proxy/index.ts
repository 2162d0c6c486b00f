// Proxying HTTP: kas's requests to an agent's services over the router, agentk's forwarder to
// in-cluster upstreams, the one hop-by-hop rule both use, body relay and failure mapping.
export {
  AgentHttpProxy,
  type AgentHttpProxyOptions,
  type AgentTarget,
  type ForwardOptions,
  ResponseAbortedError,
  SERVICE_NAME,
} from "./agent-proxy.ts";
export * from "./forwarder.ts";
export * from "./hop-by-hop.ts";
export { describeProxyError, failure, type ProxyFailure } from "./proxy-failure.ts";
