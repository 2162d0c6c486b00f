/**
 * Finding the tunnel to an agent wherever it is: this replica, another one (found through Redis,
 * reached over the private replica-to-replica API), or soon (waiting until a deadline).
 *
 * It needs `ioredis` (its Redis client; the module loads it in single-replica mode too), an
 * optional peer dependency of the package: install it beside the package.
 *
 * @module gitlab-agent-tunnel/router
 */
export {
  NoTunnelError,
  PeerRejectedError,
  RegistryUnavailableError,
  RouterError,
  type RouterErrorCode,
} from "./errors.ts";
export { type LocalOpenOptions, openLocal } from "./local-open.ts";
export { LocalRegistry, type LocalRegistryEvents, type Tunnel } from "./local-registry.ts";
export {
  DEFAULT_PEER_AUDIENCE,
  DEFAULT_PEER_ISSUER,
  PeerAuth,
  type PeerAuthOptions,
  PeerTokenError,
  readSecretFile,
} from "./peer-auth.ts";
export { PeerPool, type PeerPoolOptions } from "./peer-pool.ts";
export {
  isNoTunnel,
  NO_TUNNEL_REASON,
  type PeerIdentity,
  type PeerListenLimits,
  type PeerServerOptions,
  servePeers,
} from "./peer-server.ts";
export {
  createRedisClients,
  type RedisConnectionOptions,
  type RedisTlsOptions,
  resolveRedisOptions,
} from "./redis-options.ts";
export {
  type AgentDescription,
  type Candidate,
  DEFAULT_KEY_PREFIX,
  RedisRegistry,
  type RedisRegistryEvents,
  type RedisRegistryOptions,
} from "./redis-registry.ts";
export { DEFAULT_DIAL_TIMEOUT_MS, type DialRouteOptions, Router, type RouterOptions } from "./router.ts";
export { splice } from "./splice.ts";
export { Waiters, type WaitOptions } from "./waiters.ts";
