// Who may reach which cluster through the proxy, and as whom: GitLab says who the caller is (a CI
// job's allowed agents, a user's authorization for the agent), the agent's configuration as kas
// read it says whether that is enough and as whom the cluster sees the request.
import type { AgentConfigurations } from "../../runtime/index.ts";
import { type AuthorizeProxyRequest, type ProxyAccess, ProxyAccessError, proxyAccess } from "./access.ts";
import { ciAuthorization, userAccessAs } from "./access-rules.ts";
import { parseProxyCredentials } from "./credentials.ts";
import type { AllowedAgentsForJob, CiAccessAs, Impersonation, ProxyGitLab } from "./gitlab-answers.ts";
import { ciJobIdentity, ciUserIdentity, userIdentity } from "./impersonation.ts";
import type { CountProxyRequest } from "./usage.ts";

export interface ProxyAuthorizationOptions {
  /** The agent a static dev token belongs to (rejects with a ProxyAccessError); absent: none accepted. */
  agentToken?: (token: string, signal: AbortSignal) => Promise<{ agentId: string }>;
  /** GitLab, for CI jobs and users; absent (no gitlab.address): they are refused. */
  gitlab?: ProxyGitLab;
  configurations: AgentConfigurations;
  /** Usage counts for GitLab: each request GitLab vouched for, once authorized. */
  count?: CountProxyRequest;
}

export function authorizeProxyRequest(o: ProxyAuthorizationOptions): AuthorizeProxyRequest {
  const needGitLab = (what: string): ProxyGitLab => {
    if (o.gitlab === undefined) throw new ProxyAccessError(401, `${what} need GitLab (gitlab.address)`);
    return o.gitlab;
  };
  return async (req, signal) => {
    const creds = parseProxyCredentials(req.headers);
    switch (creds.kind) {
      case "agent_token": {
        if (o.agentToken === undefined)
          throw new ProxyAccessError(401, "static agent tokens are not accepted (agent.static_tokens_file)");
        return proxyAccess((await o.agentToken(creds.token, signal)).agentId);
      }
      case "ci_job": {
        const job = await needGitLab("CI job tokens").allowedAgentsForJob(creds.jobToken, signal);
        const access = ciJobAccessOnce(creds.agentId, job, await o.configurations.get(creds.agentId));
        o.count?.("ci_access", creds.agentId, job.user.id);
        return access;
      }
      default: {
        const { agentId } = creds;
        const accessKey = creds.kind === "session_cookie" ? creds.cookie : creds.token;
        const auth = await needGitLab("user credentials").authorizeProxyUser(
          {
            agentId,
            accessType: creds.kind,
            accessKey,
            ...(creds.kind === "session_cookie" && { csrfToken: creds.csrfToken }),
          },
          signal,
        );
        if (auth.agent.id !== agentId) throw new ProxyAccessError(403, `GitLab authorized another agent`);
        const config = await o.configurations.get(agentId);
        // Without kas's copy of the configuration, GitLab's reading of user_access stands.
        const as = config
          ? userAccessAs(agentId, config)
          : (auth.accessAs as { user?: unknown }).user !== undefined
            ? "user"
            : "agent";
        const access = proxyAccess(agentId, as === "agent" ? undefined : userIdentity(auth, creds.kind));
        o.count?.(creds.kind === "session_cookie" ? "user_access" : "pat_access", agentId, auth.user.id);
        return access;
      }
    }
  };
}

/**
 * The last decision per GitLab answer: the answer cache hands out the same object while it holds
 * it, and the agent's configuration is the same object until it changes, so a job's requests
 * encode their identity once, not on each request (a sixth of kas's own work per
 * request in `bench:rpc`'s kube list). Refusals are not kept: they are rare and cheap to repeat.
 */
const lastCiAccess = new WeakMap<
  AllowedAgentsForJob,
  { agentId: string; config: unknown; access: ProxyAccess }
>();

function ciJobAccessOnce(
  agentId: string,
  job: AllowedAgentsForJob,
  config: Parameters<typeof ciAuthorization>[1] | undefined,
): ProxyAccess {
  const last = lastCiAccess.get(job);
  if (last !== undefined && last.agentId === agentId && last.config === config) return last.access;
  const access = ciJobAccess(agentId, job, config);
  lastCiAccess.set(job, { agentId, config, access });
  return access;
}

function ciJobAccess(
  agentId: string,
  job: AllowedAgentsForJob,
  config: Parameters<typeof ciAuthorization>[1] | undefined,
): ProxyAccess {
  const allowed = job.allowedAgents.find((a) => a.id === agentId);
  if (allowed === undefined) {
    throw new ProxyAccessError(
      403,
      `the job's project may not use agent ${agentId} (GitLab's allowed_agents)`,
    );
  }
  // Without kas's copy of the configuration, GitLab's copy of the matching entry stands.
  const accessAs: CiAccessAs = config
    ? ciAuthorization(agentId, config, job).accessAs
    : (allowed.configuration.accessAs ?? { agent: {} });
  // One key is set (an absent one may still be present as undefined).
  const as = accessAs as Partial<Record<string, unknown>> & { impersonate?: Impersonation };
  if (as.impersonate !== undefined) return proxyAccess(agentId, as.impersonate);
  if (as.ci_job !== undefined) return proxyAccess(agentId, ciJobIdentity(job, allowed));
  if (as.ci_user !== undefined) return proxyAccess(agentId, ciUserIdentity(job, allowed));
  return proxyAccess(agentId);
}
