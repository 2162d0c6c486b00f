// How big views may get, whatever the cluster's size: agentk cuts to these, kas refuses more.
// Shared by both halves so that what one computes the other accepts.
import { z } from "zod";
import type { ClusterViews } from "./views.ts";

export const VIEW_LIMITS = {
  /** Namespaces in the pods view (the configured ones, or the busiest). */
  namespaces: 50,
  /** Rollouts listed in the workloads view (those not complete first). */
  rollouts: 50,
  /** Warning events kept (newest first). */
  warnings: 20,
  /** Nodes listed as not Ready or under pressure. */
  nodeProblems: 20,
  /** Conditions listed per node. */
  conditions: 8,
  /** Pods listed as in trouble. */
  podProblems: 20,
  /** Names (namespace, object, reason). */
  name: 320,
  /** Event messages, cut with an ellipsis beyond. */
  message: 512,
} as const;

const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const name = z.string().max(VIEW_LIMITS.name);
const message = z.string().max(VIEW_LIMITS.message);
/** A namespace's name is a DNS label (RFC 1123), as Kubernetes requires. */
const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const namespaceName = z.string().regex(NAMESPACE_NAME, "a namespace's name is a DNS label (RFC 1123)");
/**
 * Keys checked on the object as parsed, before the record: zod's record skips a `__proto__` key
 * without a word, so only this refuses it.
 */
const namespaceKeys = z.custom<Record<string, unknown>>(
  (v) =>
    typeof v === "object" &&
    v !== null &&
    !Array.isArray(v) &&
    Object.keys(v).every((k) => NAMESPACE_NAME.test(k)),
  "every key is a namespace's name, a DNS label (RFC 1123)",
);
const resources = z.strictObject({ cpuMillis: count, memoryBytes: count });
const phases = z.strictObject({
  Pending: count,
  Running: count,
  Succeeded: count,
  Failed: count,
  Unknown: count,
});

export const clusterViewsSchema = z.strictObject({
  nodes: z
    .strictObject({
      total: count,
      ready: count,
      capacity: resources,
      allocatable: resources,
      problems: z
        .array(
          z.strictObject({
            name,
            ready: z.boolean(),
            conditions: z
              .array(z.strictObject({ type: name, status: name, reason: name, message }))
              .max(VIEW_LIMITS.conditions),
          }),
        )
        .max(VIEW_LIMITS.nodeProblems)
        .optional(),
    })
    .optional(),
  pods: z
    .strictObject({
      namespaces: namespaceKeys
        .pipe(z.record(namespaceName, z.strictObject({ phases, restarts: count })))
        .refine((r) => Object.keys(r).length <= VIEW_LIMITS.namespaces, {
          message: `at most ${VIEW_LIMITS.namespaces} namespaces`,
        }),
      problems: z
        .array(
          z.strictObject({
            namespace: name,
            name,
            phase: z.enum(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
            reason: name,
            restarts: count,
          }),
        )
        .max(VIEW_LIMITS.podProblems)
        .optional(),
    })
    .optional(),
  workloads: z
    .strictObject({
      rollouts: z
        .array(
          z.strictObject({
            kind: z.enum(["Deployment", "StatefulSet", "DaemonSet"]),
            namespace: name,
            name,
            desired: count,
            updated: count,
            ready: count,
            available: count,
            state: z.enum(["complete", "progressing", "stuck"]),
            reason: name.optional(),
            message: message.optional(),
          }),
        )
        .max(VIEW_LIMITS.rollouts),
      total: count,
    })
    .optional(),
  warnings: z
    .strictObject({
      latest: z
        .array(
          z.strictObject({
            namespace: name,
            object: name,
            reason: name,
            message,
            count,
            lastSeen: z.string().max(64),
          }),
        )
        .max(VIEW_LIMITS.warnings),
    })
    .optional(),
});

/** Views as JSON from an agent or from Redis (input: checked, bounded); undefined with the reason otherwise. */
export function parseClusterViews(json: string): { views: ClusterViews } | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    return { error: `not JSON: ${(err as Error).message}` };
  }
  const parsed = clusterViewsSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { error: `${issue.path.join(".") || "(root)"}: ${issue.message}` };
  }
  return { views: parsed.data as ClusterViews };
}
