// `gitops`: pull-based deployment of manifests from GitLab projects (agentcfg GitopsCF and
// ManifestProjectCF). The defaults are the reference agent's (manifestops module).
import { z } from "zod";
import { type Flavour, oneOf, stringChoice, stringOr } from "./flavour.ts";

export const DEFAULT_MANIFEST_NAMESPACE = "default";
export const DEFAULT_MANIFEST_GLOB = "**/*.{yaml,yml,json}";
export const DEFAULT_RECONCILE_TIMEOUT_MS = 3_600_000;
export const DEFAULT_PRUNE_TIMEOUT_MS = 3_600_000;

export const DRY_RUN_STRATEGIES = ["none", "client", "server"] as const;
export const PRUNE_PROPAGATION_POLICIES = ["orphan", "background", "foreground"] as const;
export const INVENTORY_POLICIES = ["must_match", "adopt_if_no_inventory", "adopt_all"] as const;

const nonEmpty = z.string().min(1);

/** A Git ref without its `refs/heads/` or `refs/tags/` prefix, or a commit SHA. */
export const gitRefSchema = (f: Flavour) => oneOf(f, { tag: nonEmpty, branch: nonEmpty, commit: nonEmpty });

export const manifestProjectSchema = (f: Flavour) =>
  f.object({
    // Project path (group/project) or numeric id written as a string. GitLab's agent defaults an
    // absent id to the configuration project; this one requires it (the parser does not know
    // that project), and says so.
    id: z
      .string({
        error: (issue) =>
          issue.input === undefined
            ? "required here: write the project (GitLab's agent would take the configuration project)"
            : undefined,
      })
      .min(1),
    // Empty, like absent, is the default (proto3 strings; the reference agent's prototool.String).
    default_namespace: stringOr(DEFAULT_MANIFEST_NAMESPACE),
    // Globs (doublestar syntax) of .yaml/.yml/.json files to apply.
    paths: z
      .array(f.object({ glob: nonEmpty }))
      .default([])
      // As the reference agent does: no paths means every manifest file in the project.
      .transform((paths) => (paths.length > 0 ? paths : [{ glob: DEFAULT_MANIFEST_GLOB }])),
    reconcile_timeout: f.duration().default(DEFAULT_RECONCILE_TIMEOUT_MS),
    dry_run_strategy: stringChoice(DRY_RUN_STRATEGIES, "none"),
    prune: z.boolean().default(true),
    prune_timeout: f.duration().default(DEFAULT_PRUNE_TIMEOUT_MS),
    prune_propagation_policy: stringChoice(PRUNE_PROPAGATION_POLICIES, "foreground"),
    inventory_policy: stringChoice(INVENTORY_POLICIES, "must_match"),
    // Absent: the project's default branch.
    ref: gitRefSchema(f).optional(),
  });

export const gitopsSchema = (f: Flavour) =>
  f.object({
    manifest_projects: z.array(manifestProjectSchema(f)).default([]),
  });
