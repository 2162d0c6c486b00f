// `remote_development`: GitLab Workspaces in this cluster (agentcfg RemoteDevelopmentCF, plus the
// fields GitLab's Rails side reads from the same section). No defaults here: GitLab applies them.
import { z } from "zod";
import type { Flavour } from "./flavour.ts";
import { resourceRequirementsSchema } from "./resources.ts";

const stringMap = z.record(z.string(), z.string());

export const remoteDevelopmentSchema = (f: Flavour) =>
  f.object({
    enabled: z.boolean().default(false),
    dns_zone: z.string().optional(),
    partial_sync_interval: f
      .duration()
      .refine((ms) => ms > 0, "must be positive")
      .optional(),
    full_sync_interval: f
      .duration()
      .refine((ms) => ms > 0, "must be positive")
      .optional(),
    gitlab_workspaces_proxy: f.object({ namespace: z.string().optional() }).optional(),
    network_policy: f
      .object({
        enabled: z.boolean().optional(),
        egress: z
          .array(f.object({ allow: z.string().min(1), except: z.array(z.string()).optional() }))
          .optional(),
      })
      .optional(),
    default_resources_per_workspace_container: resourceRequirementsSchema(f).optional(),
    max_resources_per_workspace: resourceRequirementsSchema(f).optional(),
    workspaces_quota: f.integer(z.int().min(-1)).optional(),
    workspaces_per_user_quota: f.integer(z.int().min(-1)).optional(),
    use_kubernetes_user_namespaces: z.boolean().optional(),
    default_runtime_class: z.string().optional(),
    allow_privilege_escalation: z.boolean().optional(),
    annotations: stringMap.optional(),
    labels: stringMap.optional(),
    image_pull_secrets: z
      .array(f.object({ name: z.string().min(1), namespace: z.string().min(1) }))
      .optional(),
    max_active_hours_before_stop: f.integer(z.int().positive()).optional(),
    max_stopped_hours_before_termination: f.integer(z.int().positive()).optional(),
    shared_namespace: z.string().optional(),
  });
