// kas's `gitaly` section: how hard kas may press on Gitaly (GitLab's names for the process limits;
// the per-agent and cluster-wide limits, kept in Redis, are additions of ours).
import { z } from "zod";
import { countSetting, positiveNumberSetting } from "../../../tool/config/kinds.ts";

function tokenBucket(name: string, rate: number, burst: number, what: string) {
  return z.object({
    refillRatePerSecond: positiveNumberSetting({ default: rate, doc: `Gitaly calls per second, ${what}.` }),
    bucketSize: countSetting({ default: burst, doc: `Calls allowed at once above the rate (${name}).` }),
  });
}

export const gitalyKasSection = z.object({
  globalApiRateLimit: tokenBucket(
    "global_api_rate_limit",
    30,
    70,
    "from this kas process to all Gitaly servers",
  ),
  perServerApiRateLimit: tokenBucket(
    "per_server_api_rate_limit",
    15,
    40,
    "from this kas process to one Gitaly server",
  ),
  perAgentApiRateLimit: tokenBucket(
    "per_agent_api_rate_limit",
    1,
    10,
    "for one agent, all kas replicas together (Redis)",
  ),
  clusterApiRateLimit: tokenBucket("cluster_api_rate_limit", 100, 200, "all kas replicas together (Redis)"),
});

export type GitalyKasConfig = z.output<typeof gitalyKasSection>;
