// kas's observability: the daemon-agnostic pieces from tool/, and kas's own metrics.
export * from "../../../tool/observability/index.ts";
export { HandshakeMetrics } from "./handshake-metrics.ts";
export { createKasMetrics, type KasMetrics } from "./metrics.ts";
