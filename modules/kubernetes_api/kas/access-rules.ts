// The agent's own rules for the proxy, from its configuration as kas read it: which CI jobs may use
// it (`ci_access`: projects, groups, the instance; environments; protected refs) and as whom; whether users may
// (`user_access`) and as whom. GitLab says who the caller is; these say what follows.
import type { AgentConfiguration } from "../../runtime/index.ts";
import { ProxyAccessError } from "./access.ts";
import type { AllowedAgentsForJob, CiAccessAs } from "./gitlab-answers.ts";

type CiAccess = NonNullable<AgentConfiguration["ci_access"]>;
type CiEntry = CiAccess["projects"][number] | CiAccess["groups"][number] | NonNullable<CiAccess["instance"]>;

export interface CiAuthorization {
  accessAs: CiAccessAs;
  defaultNamespace?: string;
}

/**
 * Whether the job's pipeline runs for a protected branch or tag, as far as GitLab's answer shows.
 * GitLab's `allowed_agents` carries no ref and no `protected` flag: Rails filters instead, leaving
 * out every ci_access entry with `protected_branches_only` unless the pipeline's ref is protected
 * (Clusters::Agents::Authorizations::CiAccess::FilterService, `pipeline.protected_ref?`), and keeps
 * the entry's `protected_branches_only` in the `configuration` it returns. So an entry with it in
 * the answer, for any agent, shows the ref is protected; without one, kas cannot tell and takes the
 * ref as unprotected (an entry kas requires protection for then refuses: safe, if stricter than
 * GitLab while GitLab's copy of the configuration lags kas's).
 */
export function pipelineRefProtected(job: AllowedAgentsForJob): boolean {
  return job.allowedAgents.some((a) => a.configuration.protectedBranchesOnly === true);
}

/**
 * The ci_access entry that lets this job use the agent: its project (by id or full path) first,
 * then one of the project's groups, then the instance; an entry with `environments` only for jobs
 * deploying to one of them (`*` matches any run of characters), one with `protected_branches_only`
 * only for jobs whose pipeline ref is protected. 403 when none does.
 */
export function ciAuthorization(
  agentId: string,
  config: AgentConfiguration,
  job: AllowedAgentsForJob,
): CiAuthorization {
  const ci = config.ci_access;
  if (ci === undefined) throw forbidden(`agent ${agentId}'s configuration has no ci_access`);
  const { project } = job;
  const named = (id: string, thing: { id: string; path?: string }) => id === thing.id || id === thing.path;
  const candidates: CiEntry[] = [
    ...ci.projects.filter((p) => named(p.id, project)),
    ...ci.groups.filter((g) => project.groups.some((group) => named(g.id, group))),
    ...(ci.instance ? [ci.instance] : []),
  ];
  if (candidates.length === 0) {
    throw forbidden(
      `agent ${agentId}'s ci_access lists neither project ${project.path ?? project.id} nor any of its groups`,
    );
  }
  const slug = job.environment?.slug;
  const forEnvironment = candidates.filter(
    (c) => c.environments.length === 0 || (slug !== undefined && c.environments.some((e) => glob(e, slug))),
  );
  if (forEnvironment.length === 0) {
    throw forbidden(
      `agent ${agentId}'s ci_access allows project ${project.path ?? project.id} only for environments ${candidates
        .flatMap((c) => c.environments)
        .join(", ")}; this job's is ${slug ?? "none"}`,
    );
  }
  const refProtected = pipelineRefProtected(job);
  const entry = forEnvironment.find((c) => !c.protected_branches_only || refProtected);
  if (entry === undefined) {
    throw forbidden(
      `agent ${agentId}'s ci_access allows project ${project.path ?? project.id} only for jobs on protected branches or tags (protected_branches_only); this job's pipeline ref is not protected`,
    );
  }
  return {
    accessAs: entry.access_as as CiAccessAs,
    ...(entry.default_namespace !== undefined && { defaultNamespace: entry.default_namespace }),
  };
}

/** `user_access.access_as` of the agent: 403 when users may not use it. */
export function userAccessAs(agentId: string, config: AgentConfiguration): "agent" | "user" {
  const ua = config.user_access;
  if (ua === undefined) throw forbidden(`agent ${agentId}'s configuration has no user_access`);
  return (ua.access_as as { user?: unknown }).user !== undefined ? "user" : "agent";
}

function glob(pattern: string, value: string): boolean {
  const re = pattern.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${re.join(".*")}$`).test(value);
}

function forbidden(message: string): ProxyAccessError {
  return new ProxyAccessError(403, message);
}
