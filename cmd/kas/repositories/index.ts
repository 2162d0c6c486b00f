// kas's RepositoryReader: Gitaly and local git behind one interface, rate-limited toward Gitaly.
import type { Registry } from "prom-client";
import type { KasRedis, RepositoryReader } from "../../../modules/runtime/index.ts";
import type { Logger } from "../observability/index.ts";
import { RepositoriesByBackend } from "./by-backend.ts";
import type { GitalyKasConfig } from "./config.ts";
import { GitalyRepositories } from "./gitaly/index.ts";
import { LocalGitRepositories } from "./local-git.ts";
import { RateLimitedRepositories } from "./rate-limited.ts";

export { type GitalyKasConfig, gitalyKasSection } from "./config.ts";

export function createRepositories(options: {
  gitaly: GitalyKasConfig;
  redis?: KasRedis;
  registry: Registry;
  log: Logger;
}): RepositoryReader {
  const { gitaly, redis } = options;
  const spec = (s: { refillRatePerSecond: number; bucketSize: number }) => ({
    ratePerSecond: s.refillRatePerSecond,
    burst: s.bucketSize,
  });
  return new RateLimitedRepositories(
    new RepositoriesByBackend({ gitaly: new GitalyRepositories(), local: new LocalGitRepositories() }),
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
}
