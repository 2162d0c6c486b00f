// HTTP pieces the daemons and their modules share: the guard every front runs under, graceful
// listeners, kas's HTTP to an agent's services over the router, agentk's forwarder to in-cluster
// upstreams, error mapping, Server-Sent Events, and the limits every listener puts on its connections.
export {
  AgentHttpProxy,
  type AgentHttpProxyOptions,
  type AgentTarget,
  type ForwardOptions,
  ResponseAbortedError,
  SERVICE_NAME,
} from "./agent-proxy.ts";
export { ClientGoneError } from "./client-gone.ts";
export {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  httpServerOptions,
  limitHttpServer,
} from "./connection-limits.ts";
export { type EventStream, type EventStreamOptions, eventFrame, openEventStream } from "./event-stream.ts";
export * from "./forwarder.ts";
export * from "./guard.ts";
export * from "./hop-by-hop.ts";
export * from "./http-error.ts";
export { closeHalfClosed, closeUnlessAuthenticated } from "./http2-deadlines.ts";
export { type LimitCounter, type LimitLog, type LimitReport, limitReporter } from "./limit-report.ts";
export {
  type Http2Connections,
  type HttpListener,
  type HttpListenOptions,
  listenHttp,
} from "./listen-http.ts";
export { createProtocolSplitServer, HTTP2_PREFACE, prefaceVerdict } from "./protocol-split.ts";
export { describeProxyError, failure, type ProxyFailure } from "./proxy-failure.ts";
export * from "./raw-answer.ts";
export * from "./request-target.ts";
