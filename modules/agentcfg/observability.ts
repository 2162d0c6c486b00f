// `observability`: how the agent itself logs and is profiled (agentcfg ObservabilityCF).
import { z } from "zod";
import type { Flavour } from "./flavour.ts";

export const LOG_LEVELS = ["info", "debug", "warn", "error"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const DEFAULT_LOG_LEVEL: LogLevel = "info";
// The reference agent keeps gRPC's own logging quieter than its own unless asked.
export const DEFAULT_GRPC_LOG_LEVEL: LogLevel = "error";

export const loggingSchema = (f: Flavour) =>
  f.object({
    // A protobuf enum (log_level_enum): by name, or by number (info 0, debug 1, warn 2, error 3).
    level: f.protoEnum(LOG_LEVELS).default(DEFAULT_LOG_LEVEL),
    grpc_level: f.protoEnum(LOG_LEVELS).default(DEFAULT_GRPC_LOG_LEVEL),
  });

export const googleProfilerSchema = (f: Flavour) =>
  f.object({
    enabled: z.boolean().default(false),
    project_id: z.string().optional(),
    credentials_file: z.string().optional(),
    debug_logging: z.boolean().default(false),
  });

export const observabilitySchema = (f: Flavour) =>
  f.object({
    // prefault: an absent `logging` still gets its levels' defaults.
    logging: loggingSchema(f).prefault({}),
    google_profiler: googleProfilerSchema(f).optional(),
  });
