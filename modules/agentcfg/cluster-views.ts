// `cluster_views` (ours, not the reference agent's): which computed views agentk keeps from its
// informer cache and pushes to kas. Absent: off (watching every pod and node needs list/watch
// permissions the agent may not have). Written, even empty: on, with every view and namespace.
import { z } from "zod";
import type { Flavour } from "./flavour.ts";

export const CLUSTER_VIEW_NAMES = ["nodes", "pods", "workloads", "warnings"] as const;
/** Namespaces watched one by one at most (each is a watch per kind). */
export const MAX_CLUSTER_VIEWS_NAMESPACES = 50;

// A namespace name: an RFC 1123 label.
const namespaceName = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a namespace name (RFC 1123 label)");

const unique = <T>(items: readonly T[]) => new Set(items).size === items.length;

export const clusterViewsSchema = (f: Flavour) =>
  f.object({
    enabled: z.boolean().default(true),
    // Default: all of them.
    views: z
      .array(z.enum(CLUSTER_VIEW_NAMES))
      .min(1)
      .refine(unique, "each view at most once")
      .default([...CLUSTER_VIEW_NAMES]),
    // Default (empty): every namespace, with cluster-wide watches.
    namespaces: z
      .array(namespaceName)
      .max(MAX_CLUSTER_VIEWS_NAMESPACES)
      .refine(unique, "each namespace at most once")
      .default([]),
  });
