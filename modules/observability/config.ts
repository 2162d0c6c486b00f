// Observability's settings: kas's section of its configuration file, and agentk's flags.
import { z } from "zod";
import { flag } from "../../tool/config/flags.ts";
import { addressSetting, logLevelSetting, urlPathSetting } from "../../tool/config/kinds.ts";
import { parseListenAddress, parseLogLevel } from "../../tool/config/values.ts";

export const observabilityKasSection = z.object({
  listen: z.object({ address: addressSetting({ default: "127.0.0.1:8151", doc: "Metrics and probes." }) }),
  prometheus: z.object({ urlPath: urlPathSetting({ default: "/metrics", doc: "Prometheus metrics." }) }),
  livenessProbe: z.object({ urlPath: urlPathSetting({ default: "/liveness", doc: "Liveness probe." }) }),
  readinessProbe: z.object({ urlPath: urlPathSetting({ default: "/readiness", doc: "Readiness probe." }) }),
  logging: z.object({
    level: logLevelSetting({ default: "info", doc: "trace, debug, info, warn, error, fatal or silent." }),
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
