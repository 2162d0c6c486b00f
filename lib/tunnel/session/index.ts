export { Backoff, type BackoffOptions, jittered } from "./backoff.ts";
export { DEFAULT_GRACE_MS } from "./grace.ts";
export { MAX_RETRY_AFTER_MS, retryAfterMs, retryScheduled } from "./retry-after.ts";
export { bindDraining, drainingSignalOf } from "./stream-draining.ts";
export {
  type RetryInfo,
  TunnelClient,
  type TunnelClientEvents,
  type TunnelClientOptions,
} from "./tunnel-client.ts";
export { serveTunnels, type TunnelServer, type TunnelServerOptions } from "./tunnel-server.ts";
export {
  type TunnelOptions,
  TunnelSession,
  type TunnelSessionEvents,
  type TunnelStats,
} from "./tunnel-session.ts";
