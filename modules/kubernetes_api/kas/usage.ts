// The Kubernetes API proxy's usage counts for GitLab, named and counted as GitLab's kas 16.5 does
// (kubernetes_api/server): every request GitLab vouched for and the agent's configuration allowed,
// by how the caller came (a CI job: ci_access; a session cookie: user_access; a personal access
// token: pat_access), with the users and agents that used it. Static dev tokens are kas's own
// addition, with no GitLab user: not counted.
import type { UniqueUsageCounter, UsageCounter, UsageRegistry } from "../../runtime/index.ts";

export type ProxyUsageVia = "ci_access" | "user_access" | "pat_access";

/** Counts one authorized request of user `userId` to agent `agentId`. */
export type CountProxyRequest = (via: ProxyUsageVia, agentId: string, userId: string) => void;

export function proxyUsageCounters(usage: UsageRegistry): CountProxyRequest {
  const requests = usage.counter("k8s_api_proxy_request");
  const users = usage.uniqueCounter("agent_users_using_ci_tunnel");
  const by = Object.fromEntries(
    (["ci_access", "user_access", "pat_access"] as const).map((via) => [
      via,
      {
        requests: usage.counter(`k8s_api_proxy_requests_via_${via}`),
        users: usage.uniqueCounter(`k8s_api_proxy_requests_unique_users_via_${via}`),
        agents: usage.uniqueCounter(`k8s_api_proxy_requests_unique_agents_via_${via}`),
      },
    ]),
  ) as Record<
    ProxyUsageVia,
    { requests: UsageCounter; users: UniqueUsageCounter; agents: UniqueUsageCounter }
  >;
  return (via, agentId, userId) => {
    const kind = by[via];
    kind.requests.inc();
    kind.users.add(userId);
    kind.agents.add(agentId);
    requests.inc();
    users.add(userId);
  };
}
