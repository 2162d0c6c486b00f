// `POST /api/v4/internal/kubernetes/usage_metrics` as Rails takes it (API::Internal::Kubernetes,
// AgentHelpers#increment_count_events / #increment_unique_events): Grape's validation of the body
// (`counters`: a hash of integers, `unique_counters`: a hash of integer arrays), then only the
// event names Rails counts (others are dropped silently, as `params[...].slice` does), a negative
// count refused (KubernetesAgentCounter's ArgumentError: 400). GitLab answers 204.

/** Counters Rails increments (`increment_count_events`' slice). */
export const USAGE_COUNTERS = [
  "gitops_sync",
  "k8s_api_proxy_request",
  "flux_git_push_notifications_total",
  "k8s_api_proxy_requests_via_ci_access",
  "k8s_api_proxy_requests_via_user_access",
  "k8s_api_proxy_requests_via_pat_access",
] as const;

/** Unique counters Rails records (`increment_unique_events`' slice): ids of users, agents, projects. */
export const USAGE_UNIQUE_COUNTERS = [
  "agent_users_using_ci_tunnel",
  "k8s_api_proxy_requests_unique_users_via_ci_access",
  "k8s_api_proxy_requests_unique_agents_via_ci_access",
  "k8s_api_proxy_requests_unique_users_via_user_access",
  "k8s_api_proxy_requests_unique_agents_via_user_access",
  "k8s_api_proxy_requests_unique_users_via_pat_access",
  "k8s_api_proxy_requests_unique_agents_via_pat_access",
  "flux_git_push_notified_unique_projects",
] as const;

/** One usage_metrics post GitLab took: what it counted. */
export interface UsageMetrics {
  counters: Record<string, number>;
  uniqueCounters: Record<string, number[]>;
}

/** Grape's Integer: an integer, or a string of one (Grape coerces it). */
function integer(value: unknown): number | undefined {
  if (typeof value === "number" && Number.isSafeInteger(value)) return value;
  if (typeof value === "string" && /^-?\d+$/.test(value) && Number.isSafeInteger(Number(value)))
    return Number(value);
  return undefined;
}

const isHash = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The body read as Rails reads it: what it counts, or its 400 answer. */
export function readUsageMetrics(
  body: unknown,
): { ok: true; metrics: UsageMetrics } | { ok: false; error: unknown } {
  const invalid = (field: string) => ({ ok: false as const, error: { error: `${field} is invalid` } });
  if (!isHash(body)) return invalid("counters");
  const metrics: UsageMetrics = { counters: {}, uniqueCounters: {} };
  const { counters, unique_counters: unique } = body;
  if (counters != null) {
    if (!isHash(counters)) return invalid("counters");
    for (const name of USAGE_COUNTERS) {
      if (counters[name] == null) continue;
      const n = integer(counters[name]);
      if (n === undefined) return invalid(`counters[${name}]`);
      if (n < 0)
        return {
          ok: false,
          error: { message: `400 Bad request - ${name} count must be greater than or equal to zero` },
        };
      metrics.counters[name] = n;
    }
  }
  if (unique != null) {
    if (!isHash(unique)) return invalid("unique_counters");
    for (const name of USAGE_UNIQUE_COUNTERS) {
      const list = unique[name];
      if (list == null) continue;
      const ids = Array.isArray(list) ? list.map(integer) : [undefined];
      if (ids.some((id) => id === undefined)) return invalid(`unique_counters[${name}]`);
      metrics.uniqueCounters[name] = ids as number[];
    }
  }
  return { ok: true, metrics };
}
