// Pieces the HTTP fronts share: graceful listeners, HTTP to an agent's services over the router, error mapping.
export {
  AgentHttpProxy,
  type AgentHttpProxyOptions,
  type AgentTarget,
  type ForwardOptions,
  ResponseAbortedError,
  SERVICE_NAME,
} from "./agent-proxy.ts";
export { describeProxyError, failure, type ProxyFailure } from "./failure.ts";
export { type HttpListener, type HttpListenOptions, listenHttp } from "./listen.ts";
