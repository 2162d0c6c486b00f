// `POST /api/v4/internal/kubernetes/usage_metrics` ({counters, unique_counters}): kas tells GitLab
// what its users did since its last accepted report, as GitLab's kas's SendUsagePing: counters
// (`{"k8s_api_proxy_request": 3}`) and unique counters (`{"agent_users_using_ci_tunnel": [5, 11]}`,
// GitLab's int64 ids), empty maps left out. GitLab answers 204. One attempt: the caller keeps the
// counts and sends them again with its next report.
import type { GitLabClient, GitLabRefusals } from "./client.ts";
import { GitLabError } from "./errors.ts";

export const USAGE_METRICS_PATH = "/api/v4/internal/kubernetes/usage_metrics";

/** What is reported: counts by name, and ids (decimal int64 strings) by name. */
export interface UsageMetrics {
  counters: Readonly<Record<string, number>>;
  uniqueCounters: Readonly<Record<string, readonly string[]>>;
}

const USAGE_METRICS_REFUSALS: GitLabRefusals = {
  what: "usage_metrics",
  unauthenticated: "GitLab does not accept kas's request",
  forbidden: "GitLab refused kas's usage metrics",
  notFound: "GitLab has no usage_metrics endpoint",
};

const ID = /^[1-9]\d{0,18}$/;
const NAME = /^[a-z0-9_]{1,100}$/;

/**
 * The body as GitLab's kas marshals UsagePingData: `omitempty` maps, ids as JSON numbers written
 * digit for digit (exact beyond 2^53). Throws a RangeError for a name, count or id GitLab could not
 * take (a bug of the caller's, never sent).
 */
export function usageMetricsBody(data: UsageMetrics): string {
  const parts: string[] = [];
  const counters = Object.entries(data.counters);
  for (const [name, n] of counters) {
    if (!NAME.test(name)) throw new RangeError(`usage_metrics: counter name ${JSON.stringify(name)}`);
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`usage_metrics: ${name} = ${n}`);
  }
  if (counters.length > 0) parts.push(`"counters":${JSON.stringify(Object.fromEntries(counters))}`);
  const unique = Object.entries(data.uniqueCounters).map(([name, ids]) => {
    if (!NAME.test(name)) throw new RangeError(`usage_metrics: unique counter name ${JSON.stringify(name)}`);
    const bad = ids.find((id) => !ID.test(id));
    if (bad !== undefined) throw new RangeError(`usage_metrics: ${name}: id ${JSON.stringify(bad)}`);
    return `"${name}":[${ids.join(",")}]`;
  });
  if (unique.length > 0) parts.push(`"unique_counters":{${unique.join(",")}}`);
  return `{${parts.join(",")}}`;
}

/**
 * Sends one report, once (no retries). Rejects with a GitLabError (`unavailable` for GitLab down or
 * refusing the body, with its `status`), or `signal`'s reason; the caller then keeps the counts.
 */
export function postUsageMetrics(
  client: GitLabClient,
  data: UsageMetrics,
  signal?: AbortSignal,
): Promise<void> {
  let jsonText: string;
  try {
    jsonText = usageMetricsBody(data);
  } catch (err) {
    return Promise.reject(err);
  }
  return client.request(
    {
      method: "POST",
      path: USAGE_METRICS_PATH,
      headers: {},
      jsonText,
      once: true,
      refusals: USAGE_METRICS_REFUSALS,
      parse: parseUsageMetricsResponse,
    },
    signal,
  );
}

/** GitLab answers 204 without a body (GitLab's kas's NoContentResponseHandler). */
export function parseUsageMetricsResponse(body: unknown): void {
  if (body !== undefined)
    throw new GitLabError("unavailable", "GitLab answered usage_metrics with a body instead of 204");
}
