// Who may reach which cluster through the proxy, and as whom. GitLab decides, as with GitLab's own
// kas: its `allowed_agents` answer for a CI job already applies the agent's ci_access (projects,
// groups, the agent's own project, environments by name, protected_branches_only by the pipeline's
// ref) and carries the matched entry's access_as; its `authorize_proxy_user` answer applies
// user_access and carries its access_as. GitLab's copy of the configuration is the one kas posts
// (agent_configuration). kas does not check again with its own copy: GitLab's answer has no paths
// and no environment name to check with, and a second opinion could only refuse what GitLab allows.
import { signalOf } from "../../../tool/gitlab/index.ts";
import { type AuthorizeProxyRequest, type ProxyAccess, ProxyAccessError, proxyAccess } from "./access.ts";
import { parseProxyCredentials } from "./credentials.ts";
import type { AllowedAgentsForJob, Impersonation, ProxyGitLab } from "./gitlab-answers.ts";
import { ciJobIdentity, ciUserIdentity, userIdentity } from "./impersonation.ts";
import type { CountProxyRequest } from "./usage.ts";

export interface ProxyAuthorizationOptions {
  /** The agent a static dev token belongs to (rejects with a ProxyAccessError); absent: none accepted. */
  agentToken?: (token: string, signal: AbortSignal) => Promise<{ agentId: string }>;
  /** GitLab, for CI jobs and users; absent (no gitlab.address): they are refused. */
  gitlab?: ProxyGitLab;
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
        return proxyAccess((await o.agentToken(creds.token, signalOf(signal))).agentId);
      }
      case "ci_job": {
        const job = await needGitLab("CI job tokens").allowedAgentsForJob(creds.jobToken, signal);
        const access = ciJobAccessOnce(creds.agentId, job);
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
        const asUser = (auth.accessAs as { user?: unknown }).user !== undefined;
        const access = proxyAccess(agentId, asUser ? userIdentity(auth, creds.kind) : undefined);
        o.count?.(creds.kind === "session_cookie" ? "user_access" : "pat_access", agentId, auth.user.id);
        return access;
      }
    }
  };
}

/**
 * The decision per GitLab answer and agent: the answer cache hands out the same object while it
 * holds it, so a job's requests encode their identity once, not on each request (a sixth of kas's
 * own work per request in `bench:rpc`'s kube list). Refusals are not kept: they are cheap to repeat.
 */
const ciAccessByAnswer = new WeakMap<AllowedAgentsForJob, Map<string, ProxyAccess>>();

function ciJobAccessOnce(agentId: string, job: AllowedAgentsForJob): ProxyAccess {
  const decided = ciAccessByAnswer.get(job) ?? new Map<string, ProxyAccess>();
  const known = decided.get(agentId);
  if (known !== undefined) return known;
  const access = ciJobAccess(agentId, job);
  decided.set(agentId, access); // bounded: the agents of one answer
  ciAccessByAnswer.set(job, decided);
  return access;
}

/** As GitLab's kas: the agent must be in the answer; its entry's access_as says as whom (default: the agent). */
function ciJobAccess(agentId: string, job: AllowedAgentsForJob): ProxyAccess {
  const allowed = job.allowedAgents.find((a) => a.id === agentId);
  if (allowed === undefined) {
    throw new ProxyAccessError(
      403,
      `GitLab does not let this job use agent ${agentId} (allowed_agents: its ci_access authorizes neither the job's project nor its groups, for this environment and ref)`,
    );
  }
  // One key is set (an absent one may still be present as undefined).
  const as = (allowed.configuration.accessAs ?? {}) as Partial<Record<string, unknown>> & {
    impersonate?: Impersonation;
  };
  if (as.impersonate !== undefined) return proxyAccess(agentId, as.impersonate);
  if (as.ci_job !== undefined) return proxyAccess(agentId, ciJobIdentity(job, allowed));
  if (as.ci_user !== undefined) return proxyAccess(agentId, ciUserIdentity(job, allowed));
  return proxyAccess(agentId);
}
