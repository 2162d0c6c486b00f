import { Gauge, type Registry } from "prom-client";
import { type RedisConnectionOptions, Router, type RouterOptions } from "../../../lib/router/index.ts";
import { type LimitCounter, limitReporter } from "../../../tool/http/serve/index.ts";
import type { KasConfig, KasSecrets } from "../config/index.ts";
import type { ReadinessChecks } from "../observability/index.ts";

export interface KasRouterOptions {
  config: KasConfig;
  secrets: KasSecrets;
  readiness?: ReadinessChecks;
  /** Where `kas_redis_connected` goes (clustered only). */
  registry?: Registry;
  log?: { warn(obj: object, msg: string): void; debug(obj: object, msg: string): void };
  /** Where the private API's connections closed for a limit are counted. */
  limitCounter?: LimitCounter;
  /** Overrides for tests (Redis timings). */
  redisOverrides?: Partial<NonNullable<RouterOptions["redis"]>>;
}

/**
 * The router kas runs: with `redis.server.address` or `redis.sentinel`, clustered (Redis
 * registry, the private kas-to-kas API on `private_api.listen.address`, over TLS when it has a
 * certificate, peers authenticated with the private API secret, advertising
 * `private_api.own_url`), a "redis" readiness check and the `kas_redis_connected` gauge; without
 * Redis, single-replica (local tunnels only). Started on return.
 *
 * Redis down is a degraded state, not unreadiness: every replica shares the one Redis, so taking
 * them out of the load balancer for it would turn a Redis blip into a full outage, while each
 * replica still serves the agents connected to it (and agents keep connecting). The readiness
 * check reports it as a detail of a ready replica, and the gauge drops to 0.
 */
/** The readiness detail while Redis is down. */
export const REDIS_DOWN =
  "degraded: not connected to Redis; agents connected to this replica are served, agents on other replicas are unreachable until it is back";

export async function createKasRouter(options: KasRouterOptions): Promise<Router> {
  const { config, secrets, readiness, log } = options;
  const defaultTimeoutMs = config.agent.dialTimeoutMs;
  const redis = redisConnection(config.redis);
  if (redis === undefined) return new Router({ defaultTimeoutMs }).start();

  if (secrets.privateApiSecret === undefined) {
    throw new Error("private_api.listen.authentication_secret_file is required when Redis is configured");
  }
  const listen = config.privateApi.listen;
  const router = new Router({
    defaultTimeoutMs,
    privateApi: {
      ...(listen.address.host !== undefined && { host: listen.address.host }),
      port: listen.address.port,
      ...(secrets.privateApiTls && { tls: secrets.privateApiTls }),
      ...(listen.caCertificateFile !== undefined && { dial: { caFile: listen.caCertificateFile } }),
      ...(config.privateApi.ownUrl !== undefined && {
        advertiseUrl: toWebSocketUrl(config.privateApi.ownUrl),
      }),
      auth: { secret: secrets.privateApiSecret },
      limits: {
        // The private API's header deadline: a peer's handshake is a local JWT check, no GitLab call.
        handshakeTimeoutMs: config.connectionLimits.headerTimeoutMs,
        maxConnections: config.connectionLimits.maxConnections,
        maxStreamsPerConnection: config.connectionLimits.maxStreamsPerConnection,
        onLimit: limitReporter("private_api", log, options.limitCounter),
      },
    },
    redis: {
      ...redis,
      connectTimeoutMs: config.redis.dialTimeoutMs,
      keyPrefix: `${config.redis.keyPrefix}:router:`,
      ...options.redisOverrides,
    },
    onError: (err) => log?.warn({ err }, "redis"),
  });
  await router.start();
  readiness?.add("redis", () => {
    if (!router.cluster.connected) return REDIS_DOWN;
  });
  if (options.registry) {
    new Gauge({
      name: "kas_redis_connected",
      help: "1 while this replica is connected to Redis; 0 while it is not (agents on other replicas are out of reach, local ones are served).",
      registers: [options.registry],
      collect() {
        this.set(router.cluster.connected ? 1 : 0);
      },
    });
  }
  return router;
}

/** kas's `redis` section as the router's connection settings; undefined when Redis is not configured. */
export function redisConnection(redis: KasConfig["redis"]): RedisConnectionOptions | undefined {
  const { server, sentinel, tls } = redis;
  if (server.address === undefined && sentinel.masterName === undefined) return undefined;
  return {
    ...(server.address !== undefined && { server: { host: server.address.host, port: server.address.port } }),
    ...(sentinel.masterName !== undefined && {
      sentinel: {
        masterName: sentinel.masterName,
        addresses: sentinel.addresses ?? [],
        ...(sentinel.sentinelPasswordFile !== undefined && { passwordFile: sentinel.sentinelPasswordFile }),
      },
    }),
    ...(redis.username !== undefined && { username: redis.username }),
    ...(redis.passwordFile !== undefined && { passwordFile: redis.passwordFile }),
    db: redis.databaseIndex,
    tls: tls.enabled && {
      ...(tls.caCertificateFile !== undefined && { caFile: tls.caCertificateFile }),
      ...(tls.certificateFile !== undefined && { certFile: tls.certificateFile }),
      ...(tls.keyFile !== undefined && { keyFile: tls.keyFile }),
    },
  };
}

/** `http(s)://` own URLs (GitLab's kas accepts grpc-style ones) become the `ws(s)://` peers dial. */
export function toWebSocketUrl(url: string): string {
  return url.replace(/^http(s?):/, "ws$1:");
}
