// kas's RepositoryReader: Gitaly and local git behind one interface, rate-limited toward Gitaly,
// with reads at a full commit id cached above the limits (a hit costs no token).
import type { Registry } from "prom-client";
import type { KasRedis, RepositoryReader } from "../../../modules/runtime/index.ts";
import type { Logger } from "../observability/index.ts";
import { RepositoriesByBackend } from "./by-backend.ts";
import type { GitalyKasConfig } from "./config.ts";
import { GitalyRepositories } from "./gitaly/index.ts";
import { LocalGitRepositories } from "./local-git.ts";
import { RateLimitedRepositories } from "./rate-limited.ts";
import { CachedRepositories } from "./read-cache.ts";

export { type GitalyKasConfig, gitalyKasSection } from "./config.ts";

export function createRepositories(options: {
  gitaly: GitalyKasConfig;
  redis?: KasRedis;
  registry: Registry;
  log: Logger;
  /** Bytes the read cache keeps at most. Default 64 MiB. */
  readCacheMaxBytes?: number;
}): RepositoryReader {
  const { gitaly, redis } = options;
  const spec = (s: { refillRatePerSecond: number; bucketSize: number }) => ({
    ratePerSecond: s.refillRatePerSecond,
    burst: s.bucketSize,
  });
  const limited = new RateLimitedRepositories(
    new RepositoriesByBackend({
      gitaly: new GitalyRepositories(),
      local: new LocalGitRepositories({ registry: options.registry }),
    }),
    {
      processGlobal: spec(gitaly.globalApiRateLimit),
      perServer: spec(gitaly.perServerApiRateLimit),
      perAgent: spec(gitaly.perAgentApiRateLimit),
      clusterGlobal: spec(gitaly.clusterApiRateLimit),
      ...(redis && { redis: redis.client, keyPrefix: `${redis.keyPrefix}gitaly_rate_limit` }),
      registry: options.registry,
      log: options.log,
    },
  );
  return new CachedRepositories(limited, {
    registry: options.registry,
    ...(options.readCacheMaxBytes !== undefined && { maxBytes: options.readCacheMaxBytes }),
  });
}
