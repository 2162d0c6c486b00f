// kas's observability: the daemon-agnostic pieces from cmd/common, and kas's own metrics.
export * from "../../common/observability/index.ts";
export { createKasMetrics, type KasMetrics } from "./metrics.ts";
