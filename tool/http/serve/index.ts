// Serving HTTP: listeners with their connection limits, the guard every front runs under, errors
// as each front renders them, raw answers on upgraded connections, Server-Sent Events, cookies.
export { ClientGoneError } from "./client-gone.ts";
export {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  httpServerOptions,
  limitHttpServer,
} from "./connection-limits.ts";
export { type Cookie, cookieValue, readCookies } from "./cookies.ts";
export { type EventStream, type EventStreamOptions, eventFrame, openEventStream } from "./event-stream.ts";
export * from "./guard.ts";
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
export * from "./raw-answer.ts";
export * from "./request-target.ts";
