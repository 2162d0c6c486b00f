// Observability's settings: kas's section of its configuration file, and agentk's flags.
import { z } from "zod";
import { flag } from "../../tool/config/flags.ts";
import {
  addressSetting,
  durationSetting,
  listenNetworkSetting,
  logLevelSetting,
  notUsedSetting,
  urlPathSetting,
} from "../../tool/config/kinds.ts";
import {
  parseAnyString,
  parseBool,
  parseListenAddress,
  parseLogLevel,
  parseOneOf,
  parseString,
} from "../../tool/config/values.ts";

const OBSERVABILITY_PLAIN =
  "this kas serves metrics and probes over plain HTTP (keep the listener on a private address)";
const TRACING = "this kas does not export traces";
const SENTRY = "this kas does not send errors to Sentry";
const PROFILER = "this kas does not run the Google Cloud Profiler";

export const observabilityKasSection = z.object({
  usageReportingPeriodMs: durationSetting({
    default: "1m",
    doc: "How often usage counts are sent to GitLab (usage_metrics); 0s: never.",
  }),
  listen: z.object({
    network: listenNetworkSetting(),
    address: addressSetting({ default: "127.0.0.1:8151", doc: "Metrics and probes." }),
    certificateFile: notUsedSetting(parseString, {
      kind: "file path",
      doc: "GitLab's: TLS certificate of the observability listener.",
      notUsed: OBSERVABILITY_PLAIN,
    }),
    keyFile: notUsedSetting(parseString, {
      kind: "file path",
      doc: "GitLab's: TLS key of the observability listener.",
      notUsed: OBSERVABILITY_PLAIN,
    }),
  }),
  prometheus: z.object({ urlPath: urlPathSetting({ default: "/metrics", doc: "Prometheus metrics." }) }),
  livenessProbe: z.object({ urlPath: urlPathSetting({ default: "/liveness", doc: "Liveness probe." }) }),
  readinessProbe: z.object({ urlPath: urlPathSetting({ default: "/readiness", doc: "Readiness probe." }) }),
  logging: z.object({
    level: logLevelSetting({ default: "info", doc: "trace, debug, info, warn, error, fatal or silent." }),
    grpcLevel: notUsedSetting(parseOneOf(["info", "debug", "warn", "error"]), {
      kind: "log level",
      doc: "GitLab's: the gRPC library's log level.",
      notUsed: "this kas has no gRPC library log of its own (observability.logging.level covers everything)",
    }),
  }),
  tracing: z.object({
    otlpEndpoint: notUsedSetting(parseString, {
      kind: "URL",
      doc: "GitLab's: OTLP traces endpoint.",
      notUsed: TRACING,
    }),
    otlpTokenSecretFile: notUsedSetting(parseString, {
      kind: "file path",
      doc: "GitLab's: OTLP API token file.",
      notUsed: TRACING,
    }),
    otlpCaCertificateFile: notUsedSetting(parseString, {
      kind: "file path",
      doc: "GitLab's: OTLP collector's CA certificate.",
      notUsed: TRACING,
    }),
  }),
  sentry: z.object({
    dsn: notUsedSetting(parseAnyString, { kind: "string", doc: "GitLab's: Sentry DSN.", notUsed: SENTRY }),
    environment: notUsedSetting(parseAnyString, {
      kind: "string",
      doc: "GitLab's: Sentry environment.",
      notUsed: SENTRY,
    }),
  }),
  googleProfiler: z.object({
    enabled: notUsedSetting(parseBool, {
      kind: "boolean",
      doc: "GitLab's: Google Cloud Profiler.",
      notUsed: PROFILER,
    }),
    projectId: notUsedSetting(parseString, { kind: "string", doc: "GitLab's.", notUsed: PROFILER }),
    credentialsFile: notUsedSetting(parseString, { kind: "file path", doc: "GitLab's.", notUsed: PROFILER }),
    debugLogging: notUsedSetting(parseBool, { kind: "boolean", doc: "GitLab's.", notUsed: PROFILER }),
  }),
});

/** agentk's flags for the same: its listener and its log level. */
export const observabilityAgentkFlags = z.object({
  observabilityListenAddress: flag(parseListenAddress, {
    kind: "host:port",
    env: "AGENTK_OBSERVABILITY_LISTEN_ADDRESS",
    default: ":8080",
    doc: "metrics (/metrics) and probes (/liveness, /readiness)",
  }),
  logLevel: flag(parseLogLevel, {
    kind: "log level",
    env: "AGENTK_LOG_LEVEL",
    default: "info",
    doc: "trace, debug, info, warn, error",
  }),
});
