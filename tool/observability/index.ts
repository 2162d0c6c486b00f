export { createLogger, type Logger, type LoggerOptions } from "./logger.ts";
export { createRegistry, RequestMetrics, TunnelMetrics } from "./metrics.ts";
export { type CheckResult, type ReadinessCheck, ReadinessChecks } from "./readiness.ts";
export { REDACT_PATHS, REDACTED, scrubString, scrubValue } from "./redact.ts";
export { type ObservabilityOptions, type ObservabilityServer, serveObservability } from "./server.ts";
