// `ci_access` and `user_access`: who may reach the cluster through kas's Kubernetes API proxy, and
// as whom (agentcfg CiAccessCF and UserAccessCF).
import { z } from "zod";
import { type Flavour, oneOf } from "./flavour.ts";

const nonEmpty = z.string().min(1);

export const impersonateSchema = (f: Flavour) =>
  f.object({
    username: nonEmpty,
    groups: z.array(nonEmpty).default([]),
    uid: z.string().optional(),
    extra: z.array(f.object({ key: nonEmpty, val: z.array(nonEmpty).min(1) })).default([]),
  });

/**
 * As whom a CI job's requests reach the Kubernetes API: the agent's service account, a fixed
 * impersonated identity, or the job / the user who started it (`gitlab:ci_job:<id>`, ...).
 */
export const ciAccessAsSchema = (f: Flavour) =>
  oneOf(f, {
    agent: f.object({}),
    impersonate: impersonateSchema(f),
    ci_job: f.object({}),
    // Reserved in GitLab's proto (commented out there, gitlab-org/gitlab#327410): GitLab itself
    // refuses it today. Accepted here so that kas can offer `gitlab:user:<name>` for CI jobs.
    ci_user: f.object({}),
  });

const ciAuthorizationShape = (f: Flavour) => ({
  default_namespace: z.string().optional(),
  // GitLab's default: the agent's own identity.
  access_as: ciAccessAsSchema(f).default({ agent: {} }),
  // Only jobs deploying to these environments (wildcards allowed); empty means all.
  environments: z.array(nonEmpty).default([]),
  protected_branches_only: z.boolean().default(false),
});

export const ciAccessProjectSchema = (f: Flavour) => f.object({ id: nonEmpty, ...ciAuthorizationShape(f) });
export const ciAccessGroupSchema = (f: Flavour) => f.object({ id: nonEmpty, ...ciAuthorizationShape(f) });
/** Every project of the instance (`instance: {}`; recent GitLab, self-managed, behind an admin setting). */
export const ciAccessInstanceSchema = (f: Flavour) => f.object(ciAuthorizationShape(f));

export const ciAccessSchema = (f: Flavour) =>
  f.object({
    projects: z.array(ciAccessProjectSchema(f)).default([]),
    groups: z.array(ciAccessGroupSchema(f)).default([]),
    instance: ciAccessInstanceSchema(f).optional(),
  });

/** As whom a GitLab user's requests reach the Kubernetes API: the agent, or the user impersonated. */
export const userAccessAsSchema = (f: Flavour) => oneOf(f, { agent: f.object({}), user: f.object({}) });

export const userAccessSchema = (f: Flavour) =>
  f.object({
    // Required: GitLab has no default for user access.
    access_as: userAccessAsSchema(f),
    projects: z.array(f.object({ id: nonEmpty })).default([]),
    groups: z.array(f.object({ id: nonEmpty })).default([]),
  });
