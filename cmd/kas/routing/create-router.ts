import { Router, type RouterOptions } from "../../../lib/router/index.ts";
import type { KasConfig, KasSecrets } from "../config/index.ts";
import type { ReadinessChecks } from "../observability/index.ts";

export interface KasRouterOptions {
  config: KasConfig;
  secrets: KasSecrets;
  readiness?: ReadinessChecks;
  log?: { warn(obj: object, msg: string): void };
  /** Overrides for tests (Redis timings). */
  redisOverrides?: Partial<NonNullable<RouterOptions["redis"]>>;
}

/**
 * The router kas runs: with `redis.server.address`, clustered (Redis registry, the private
 * kas-to-kas API on `private_api.listen.address`, peers authenticated with the private API
 * secret, advertising `private_api.own_url`) and a "redis" readiness check; without it,
 * single-replica (local tunnels only). Started on return.
 */
export async function createKasRouter(options: KasRouterOptions): Promise<Router> {
  const { config, secrets, readiness, log } = options;
  const redisAddress = config.redis.server.address;
  const defaultTimeoutMs = config.agent.dialTimeoutMs;
  if (redisAddress === undefined) return new Router({ defaultTimeoutMs }).start();

  if (secrets.privateApiSecret === undefined) {
    throw new Error("private_api.listen.authentication_secret_file is required with redis.server.address");
  }
  const listen = config.privateApi.listen.address;
  const router = new Router({
    defaultTimeoutMs,
    privateApi: {
      ...(listen.host !== undefined && { host: listen.host }),
      port: listen.port,
      ...(config.privateApi.ownUrl !== undefined && {
        advertiseUrl: toWebSocketUrl(config.privateApi.ownUrl),
      }),
      auth: { secret: secrets.privateApiSecret },
    },
    redis: {
      server: { host: redisAddress.host, port: redisAddress.port },
      ...(config.redis.passwordFile !== undefined && { passwordFile: config.redis.passwordFile }),
      tls: config.redis.tls,
      connectTimeoutMs: config.redis.dialTimeoutMs,
      keyPrefix: `${config.redis.keyPrefix}:router:`,
      ...options.redisOverrides,
    },
    onError: (err) => log?.warn({ err }, "redis"),
  });
  await router.start();
  readiness?.add("redis", () => {
    if (!router.cluster.connected) throw new Error("not connected to Redis");
  });
  return router;
}

/** `http(s)://` own URLs (GitLab's kas accepts grpc-style ones) become the `ws(s)://` peers dial. */
export function toWebSocketUrl(url: string): string {
  return url.replace(/^http(s?):/, "ws$1:");
}
